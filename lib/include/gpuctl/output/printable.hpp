#pragma once
// Text from the cluster (names, messages, events, reasons) made safe for a terminal. A server,
// a pod's author or anyone who can write an annotation could otherwise clear the screen, move
// the cursor, forge table rows or reorder a line with bidi overrides in gpuctl's human output.
// Every human renderer passes such text through printable(); JSON and YAML output stay exact.
#include <string>
#include <string_view>

namespace gpuctl::output {

// `text` with every control character escaped: C0 (tab and newline included) as \xHH, DEL as
// \x7f, C1 (U+0080..U+009F) and the bidi embeddings, overrides and isolates (U+202A..U+202E,
// U+2066..U+2069) as \uHHHH, and bytes that are not UTF-8 as \xHH (a lone 0x9b is a CSI to
// some terminals). Everything else, other UTF-8 included, is kept as it is.
std::string printable(std::string_view text);

// True when printable(text) would change nothing.
bool is_printable(std::string_view text);

}  // namespace gpuctl::output
