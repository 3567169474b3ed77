"""Backup archives for the backup/restore suite (test_backup_restore.py): reading a gzip'd tar,
repacking one with a member changed as a careful tamperer would, breaking one (truncated, a byte
flipped), the archive paths of a manifest, and the reports of `gpuctl restore -o json`."""
import io
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import harness as h
from backup_ground import RESOURCES


def read_members(data):
    """[(TarInfo, bytes or None)] of a gzip tar, in archive order."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        for m in t.getmembers():
            out.append((m, t.extractfile(m).read() if m.isfile() else None))
    return out


def write_members(path, members):
    """A gzip tar of `members` in that order, each header as it was but for the size (what a
    careful tamperer makes: a valid archive whose content no longer matches its manifest). Plain
    ustar, as gpuctl writes: its reader refuses pax and GNU extension headers, and a refusal for
    the format would let a tampering test pass for the wrong reason."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT) as t:
        for info, data in members:
            info = _copy_info(info)
            if data is None:
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    Path(path).write_bytes(buf.getvalue())
    os.chmod(path, 0o600)
    return Path(path)


def _copy_info(info):
    c = tarfile.TarInfo(info.name)
    for a in ("size", "mode", "mtime", "type", "linkname", "uid", "gid", "uname", "gname"):
        setattr(c, a, getattr(info, a))
    return c


def rewrite_member(src, dst, name, edit):
    """A copy of archive `src` with member `name`'s bytes replaced by edit(bytes), repacked."""
    members = read_members(Path(src).read_bytes())
    found = False
    out = []
    for info, data in members:
        if info.name == name:
            new = edit(data)
            if new == data:
                raise h.HarnessError("edit of %s changed nothing" % name)
            data, found = new, True
        out.append((info, data))
    if not found:
        raise h.HarnessError("no member %s in %s" % (name, src))
    return write_members(dst, out)


def replace_once(old, new):
    def edit(data):
        if data.count(old) < 1:
            raise h.HarnessError("%r not in the member" % old)
        return data.replace(old, new, 1)
    return edit


def bump_digit_after(key):
    """Changes one byte: the last digit on the first line holding `key` (a quota's value)."""
    def edit(data):
        lines = data.split(b"\n")
        for i, line in enumerate(lines):
            if key in line:
                m = list(re.finditer(rb"\d", line))
                if not m:
                    continue
                j = m[-1].start()
                lines[i] = line[:j] + bytes([ord("0") + (int(line[j:j + 1]) + 1) % 10]) + line[j + 1:]
                return b"\n".join(lines)
        raise h.HarnessError("no line with %r and a digit" % key)
    return edit


def truncated(src, dst, keep=0.6):
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[:int(len(data) * keep)])
    return Path(dst)


def flipped_byte(src, dst):
    """One byte of the compressed stream changed, in the middle of the deflate data."""
    data = bytearray(Path(src).read_bytes())
    i = len(data) // 2
    data[i] ^= 0x5A
    Path(dst).write_bytes(bytes(data))
    return Path(dst)


def archive_paths(manifest):
    return {fl["path"]: k["resource"] for k in manifest["kinds"] for fl in k["files"]}


def key_of(path):
    """(kind, namespace, name) of an archive path."""
    parts = path[:-len(".yaml")].split("/")
    kind = RESOURCES[parts[0]][0]
    return (kind, "", parts[1]) if len(parts) == 2 else (kind, parts[1], parts[2])


# -- running gpuctl --------------------------------------------------------------------------------

def gpuctl_bytes(*args, input=None, context=None, timeout=180):
    """gpuctl with binary stdin/stdout (backup -f -, restore -); returns (rc, stdout bytes, stderr text)."""
    i = h.info()
    env = dict(os.environ, KUBECONFIG=i["kubeconfigs"][context] if context else i["kubeconfig"])
    p = subprocess.run([h.gpuctl_bin(), *map(str, args)], input=input, env=env, timeout=timeout,
                       stdin=None if input is not None else subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def report_json(test, r):
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        test.fail("not a JSON report (exit %d):\nstdout: %s\nstderr: %s" % (r.rc, r.stdout[:3000], r.stderr[-3000:]))
    test.assertEqual(doc.get("apiVersion"), "gpuctl.io/v1alpha1", doc)
    return doc


def items_of(test, report):
    """{(kind, namespace, name): item}; no object twice."""
    out = {}
    for it in report["items"]:
        k = (it["kind"], it.get("namespace") or "", it["name"])
        test.assertNotIn(k, out, "object reported twice: %s" % (k,))
        out[k] = it
    return out


def fields(item):
    return {c["field"]: c for c in item.get("changes") or []}
