#!/usr/bin/python3
"""corpus.py — the training corpus of specdec's default model pair: permissively licensed Python from Debian.

    /usr/bin/python3 tools/corpus.py [--cache tools/runs/debian] [--out tools/runs/corpus] [--versions TSV]
                             [--new-prompts N]

Sources: the Debian 12 packages of PACKAGES — the Python 3.11 standard library with its test suite, then
well-known BSD/MIT/Apache/PSF-licensed projects — fetched with `apt-get download` into CACHE/debs (no root
install; run `apt-get update` once first) and unpacked there with `dpkg-deb -x`. Both steps skip what CACHE
already holds: the corpus is a function of the cached .deb files, whose versions are recorded (packages.tsv;
--versions TSV fetches the versions such a file names, e.g. weights/pystd/corpus_packages.tsv). Of each package,
the *.py files under usr/lib/python3.11/ (the standard library) or usr/lib/python3/dist-packages/ are read.

Licences: each package's usr/share/doc/<package>/copyright is parsed (Debian's machine-readable format, DEP-5:
`Files:` patterns, the last matching paragraph giving a file's `License:`) and a file is kept only if its licence
is permissive (PERMISSIVE: BSD, MIT/Expat, Apache, PSF, ISC, zlib, public domain, ...; an `or` needs one
permissive alternative, an `and` all). A file under any other licence (GPL, LGPL, MPL, CC-BY-SA, unknown) is left
out and counted. A few packages' copyright files are free-form, not DEP-5, or give a licence without a name:
PACKAGES gives that licence as read.

Left out as generated or noisy: encodings/*.py that hold a charmap `decoding_table`, _sysconfigdata*.py,
pydoc_data/topics.py, test files named bad*.py (broken on purpose), files that are not UTF-8, empty, over 1 MB or
with a line over 2000 characters (embedded data).

Deduplication, in PACKAGES order (the standard library first), the first file of a group kept:
  * exact: the same normalized content — lines stripped of surrounding whitespace, blank and comment-only lines
    dropped — hashed with SHA-256;
  * near: Jaccard similarity ≥ NEAR_JACCARD of the files' sets of normalized lines, estimated by one-permutation
    MinHash (Li, Owen & Zhang 2012) with rotation densification (Shrivastava & Li 2014) over MINHASH_BINS bins and
    found by locality-sensitive hashing (bands of BAND_ROWS bins); candidate pairs are confirmed on the estimate.

Split by file, deterministically: a file is held out for validation when the first 8 bytes of SHA-256 of its
path, read as a fraction of 2^64, are below VAL_FRACTION (so a file's split does not depend on the other files),
or when it contains the text of one of the benchmark's prompts (bench/prompts/python.jsonl, kept as they are, so
that no prompt's source is trained on; the run fails if a training file still contains one). --new-prompts N
cuts N new ones from held-out files instead (see prompts()): ids "pyNN-<package>.<path>:<offset>".

Writes to OUT: train.jsonl, val.jsonl (one {"path", "text"} per file, path = <package>/<path in the package>),
packages.tsv (package, version, SHA-256 of the .deb, licence read, kept and left-out counts), licenses/<package>
(each copyright file, to ship with weights trained on it), and last manifest.tsv (split, SHA-256 of the bytes,
size, licence, path — every kept file), the mark that the stage is done.
"""

import argparse
import collections
import fnmatch
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

# (Debian package, the licence that its copyright file gives without a name, as read there: that of all its files
# when the file is free-form, or of the DEP-5 paragraphs whose License: field has no short name; None if none)
PACKAGES = [
    # The standard library, in the packages Debian splits it into. Python's copyright file is free-form: the PSF
    # License Agreement, with the other notices it lists for Lib/ files (logging, multiprocessing, sqlite3,
    # asyncio, tarfile, turtle) permissive ones.
    ("libpython3.11-minimal", "PSF-2"),
    ("libpython3.11-stdlib", "PSF-2"),
    ("libpython3.11-testsuite", "PSF-2"),
    ("python3-distutils", "PSF-2"),
    ("python3-lib2to3", "PSF-2"),
    ("idle-python3.11", "PSF-2"),
    ("python3.11-venv", "PSF-2"),
    # Free-form copyright files, read: NumPy BSD-3-clause (its bundled parts, listed after, BSD/MIT/zlib/public
    # domain); setuptools MIT (vendored packaging Apache-2.0); Jinja2 BSD-3-clause (the GPL parts it names are
    # JavaScript and Emacs Lisp of the source package only); PyYAML and html5lib MIT.
    ("python3-numpy", "BSD-3-clause"),
    ("python3-setuptools", "Expat"),
    ("python3-jinja2", "BSD-3-clause"),
    ("python3-yaml", "Expat"),
    ("python3-html5lib", "Expat"),
    # DEP-5, but its main paragraph (Files: *) gives the Matplotlib License (PSF-based) without a short name.
    ("python3-matplotlib", "matplotlib"),
    # DEP-5 copyright files, parsed.
    ("python3-scipy", None), ("python3-sympy", None), ("python3-mpmath", None), ("python3-pandas", None),
    ("python3-django", None), ("python3-twisted", None), ("python3-requests", None), ("python3-urllib3", None),
    ("python3-idna", None), ("python3-attr", None), ("python3-click", None), ("python3-flask", None),
    ("python3-werkzeug", None), ("python3-pygments", None), ("python3-docutils", None), ("python3-sphinx", None),
    ("python3-networkx", None), ("python3-sqlalchemy", None), ("python3-alembic", None), ("python3-mako", None),
    ("python3-babel", None), ("python3-dateutil", None), ("python3-tz", None), ("python3-tornado", None),
    ("python3-pytest", None), ("python3-pluggy", None), ("python3-sklearn", None),
    ("python3-skimage", None), ("python3-statsmodels", None), ("python3-patsy", None), ("python3-seaborn", None),
    ("python3-astropy", None), ("python3-dask", None), ("python3-distributed", None), ("python3-xarray", None),
    ("python3-toolz", None), ("python3-cloudpickle", None), ("python3-joblib", None), ("python3-numba", None),
    ("python3-tables", None), ("python3-pywt", None), ("python3-nltk", None), ("python3-aiohttp", None),
    ("python3-httpx", None), ("python3-h11", None), ("python3-anyio", None), ("python3-trio", None),
    ("python3-mypy", None), ("black", None), ("python3-jedi", None), ("python3-parso", None),
    ("python3-ipython", None), ("python3-traitlets", None), ("python3-prompt-toolkit", None),
    ("python3-jupyter-client", None), ("python3-ipykernel", None), ("python3-nbformat", None),
    ("python3-nbconvert", None), ("python3-notebook", None), ("python3-pyparsing", None),
    ("python3-packaging", None), ("python3-pip", None), ("python3-bs4", None), ("python3-markdown", None),
    ("python3-sqlparse", None), ("python3-pydantic", None), ("python3-cryptography", None),
    ("python3-boto3", None), ("python3-botocore", None), ("python3-coverage", None), ("python3-rich", None),
    ("python3-psutil", None), ("python3-pexpect", None), ("python3-simplejson", None),
    ("python3-more-itertools", None), ("python3-sortedcontainers", None), ("python3-celery", None),
    ("python3-kombu", None), ("python3-scrapy", None), ("python3-openpyxl", None), ("python3-fsspec", None),
    ("python3-zope.interface", None), ("python3-pyasn1", None), ("python3-numpydoc", None),
]

# Licence names (as DEP-5 files spell them, lower case, without a trailing "+" for "or later") that permit
# training on and redistributing with notices: BSD, MIT and Apache families, PSF/Python, and the like.
PERMISSIVE = {
    "apache", "apache-2", "apache-2.0", "bsd", "bsd-2", "bsd-2-clause", "bsd-3", "bsd-3-clause", "bsd-style",
    "bsdlike", "bsd-generic", "bsd-lbnl", "simplified bsd", "anaconda-bsd", "expat", "mit", "mit-style", "isc",
    "zlib", "boost-1.0", "psf", "psf-2", "psf license", "python", "python-2.0", "python-2.1.1", "psf-baseconv",
    "public-domain", "cc0-1.0", "unicode", "zope-2.1", "matplotlib", "etree13",
}
SOURCE_ROOTS = ("src/", "lib/")      # source-tree folders that installing strips: src/click/x.py -> click/x.py
PY_ROOTS = ("usr/lib/python3.11/", "usr/lib/python3/dist-packages/")

VAL_FRACTION = 0.01
MAX_FILE_BYTES = 1 << 20
MAX_LINE = 2000
NEAR_JACCARD = 0.8
MINHASH_BINS = 128
BAND_ROWS = 4


# ---------------------------------------------------------------------------------------------------------------
# Debian packages
# ---------------------------------------------------------------------------------------------------------------

def fetch(packages, cache, log, versions=None):
    """{package: (version, sha256 of the .deb, unpacked root)}: downloads (the version `versions` names, if any,
    else the current one) and unpacks what CACHE lacks."""
    versions = versions or {}
    debs = os.path.join(cache, "debs")
    os.makedirs(debs, exist_ok=True)
    missing = [p + (f"={versions[p]}" if p in versions else "") for p in packages
               if not glob.glob(os.path.join(debs, p + "_*.deb"))]
    if missing:
        log(f"apt-get download {len(missing)} packages into {debs}")
        r = subprocess.run(["apt-get", "download"] + missing, cwd=debs, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"corpus: apt-get download failed (run `apt-get update` first?): {r.stderr.strip()}")
    found = {}
    for p in packages:
        names = glob.glob(os.path.join(debs, p + "_*.deb"))
        if len(names) != 1:
            sys.exit(f"corpus: {debs}: expected one {p}_*.deb, found {len(names)}: delete the old versions")
        deb = names[0]
        version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        if versions.get(p, version) != version:
            sys.exit(f"corpus: {deb}: version {version}, but {versions[p]} is asked for: delete it")
        with open(deb, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        root = os.path.join(cache, "root", f"{p}_{version}")
        if not os.path.isdir(root):
            shutil.rmtree(root + ".tmp", ignore_errors=True)
            os.makedirs(root + ".tmp")
            subprocess.run(["dpkg-deb", "-x", deb, root + ".tmp"], check=True)
            os.replace(root + ".tmp", root)
        found[p] = (version, digest, root)
    return found


# ---------------------------------------------------------------------------------------------------------------
# Licences
# ---------------------------------------------------------------------------------------------------------------

def parse_copyright(text):
    """[(patterns, licence name)] of the `Files:` paragraphs of a DEP-5 copyright file, in file order.
    Raises ValueError when the file is not in that format (no `Format:` field in its first paragraph)."""
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", text.strip()) if p.strip()]
    if not paragraphs or not re.search(r"^Format:", paragraphs[0], re.M):
        raise ValueError("not a machine-readable (DEP-5) copyright file")
    out = []
    for para in paragraphs:
        fields, key = {}, None
        for line in para.split("\n"):
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if "files" in fields:
            licence = fields.get("license", "").split("\n")[0].strip()
            out.append((fields["files"].split(), licence))
    return out


def is_permissive(licence: str) -> bool:
    """Whether a DEP-5 licence expression is permissive: `a or b` when one side is, `a and b` when both are."""
    name = licence.strip().lower()
    if not name:
        return False
    if " or " in name:
        return any(is_permissive(alt) for alt in name.split(" or "))
    if " and " in name:
        return all(is_permissive(part) for part in name.split(" and "))
    return name.rstrip("+") in PERMISSIVE


def pattern_matches(pattern: str, rel: str) -> bool:
    """Whether a DEP-5 `Files:` pattern (a path in the source tree; * and ? match any characters, / included)
    names the installed file rel (a path under the package's Python folder)."""
    if pattern.endswith("/"):
        pattern += "*"
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    return pattern.startswith(SOURCE_ROOTS) and fnmatch.fnmatchcase(rel, pattern.split("/", 1)[1])


def file_licence(paragraphs, rel: str) -> str:
    """The licence of the last paragraph whose patterns match rel (DEP-5's rule), or "" when none does."""
    licence = ""
    for patterns, lic in paragraphs:
        if any(pattern_matches(p, rel) for p in patterns):
            licence = lic
    return licence


# ---------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------

def excluded(rel: str, text: str) -> bool:
    """Generated or noisy files (see the module's docstring)."""
    name = os.path.basename(rel)
    if name.startswith("_sysconfigdata") or rel == "pydoc_data/topics.py":
        return True
    if rel.startswith("test/") and name.startswith("bad"):
        return True
    if len(text.encode()) > MAX_FILE_BYTES or max(map(len, text.split("\n"))) > MAX_LINE:
        return True
    return rel.startswith("encodings/") and "decoding_table = (" in text


def package_files(root: str):
    """[(rel, text)] of a package's *.py files under PY_ROOTS, valid UTF-8 and not excluded, sorted by path."""
    out = []
    for base in PY_ROOTS:
        top = os.path.join(root, base)
        paths = []
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("config-"))
            paths += [os.path.join(folder, f) for f in files if f.endswith(".py")]
        for path in sorted(paths):
            if os.path.islink(path):
                continue
            rel = os.path.relpath(path, top)
            with open(path, "rb") as f:
                raw = f.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if text.strip() and not excluded(rel, text):
                out.append((rel, text))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Deduplication
# ---------------------------------------------------------------------------------------------------------------

def normalized_lines(text: str):
    """The lines that carry code: stripped, without blank and comment-only lines."""
    return [s for s in (line.strip() for line in text.split("\n")) if s and not s.startswith("#")]


def minhash(lines, bins=MINHASH_BINS):
    """One-permutation MinHash of a set of lines: each line's 64-bit hash h goes to bin h mod bins, which keeps
    the least h // bins; an empty bin takes the value of the next non-empty one to its right (circularly), tagged
    with the distance, so that two sets' signatures agree in a bin with probability their Jaccard similarity."""
    empty = 1 << 64
    sig = [empty] * bins
    for line in set(lines):
        h = int.from_bytes(hashlib.blake2b(line.encode(), digest_size=8).digest(), "little")
        b, v = h % bins, h // bins
        if v < sig[b]:
            sig[b] = v
    if all(v == empty for v in sig):
        return None
    dense = []
    for b in range(bins):
        k = 0
        while sig[(b + k) % bins] == empty:
            k += 1
        dense.append((sig[(b + k) % bins], k))
    return dense


def deduplicate(files, log):
    """The files (in order) that are neither exact (normalized) nor near duplicates of an earlier one, and
    {index of a dropped file: index of the kept file it duplicates}."""
    kept, dropped, by_digest = [], {}, {}
    for i, f in enumerate(files):
        lines = normalized_lines(f["text"])
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        if digest in by_digest:
            dropped[i] = by_digest[digest]
        else:
            by_digest[digest] = i
            kept.append((i, minhash(lines)))
    log(f"dedup: {len(dropped)} exact duplicates (normalized content) of {len(files)} files")
    # Locality-sensitive hashing: files whose signatures agree on every bin of some band are candidates.
    signature = dict(kept)
    buckets = collections.defaultdict(list)
    for i, sig in kept:
        if sig is None:
            continue
        for band in range(0, MINHASH_BINS, BAND_ROWS):
            buckets[(band, tuple(sig[band:band + BAND_ROWS]))].append(i)
    near = {}
    for members in buckets.values():
        for j in members[1:]:
            if j in near:
                continue
            for i in members:
                if i >= j:
                    break
                if i in near:
                    continue
                same = sum(a == b for a, b in zip(signature[i], signature[j]))
                if same >= NEAR_JACCARD * MINHASH_BINS:
                    near[j] = i
                    break
    dropped.update(near)
    log(f"dedup: {len(near)} near duplicates (Jaccard >= {NEAR_JACCARD} of normalized lines)")
    return [f for i, f in enumerate(files) if i not in dropped], dropped


# ---------------------------------------------------------------------------------------------------------------
# Split and prompts
# ---------------------------------------------------------------------------------------------------------------

def held_out_by_hash(path: str) -> bool:
    return int.from_bytes(hashlib.sha256(path.encode()).digest()[:8], "big") < VAL_FRACTION * 2**64


def split(files, prompt_texts):
    """(train, val): val the files chosen by held_out_by_hash and those that contain a prompt's text."""
    val = [f for f in files if held_out_by_hash(f["path"]) or any(p in f["text"] for p in prompt_texts)]
    chosen = {id(f) for f in val}
    return [f for f in files if id(f) not in chosen], val


DEF_LINE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w+.*:[ \t]*$", re.M)


def spread(items, n):
    """n of the items (all if fewer), evenly spaced: the middles of n equal runs."""
    return items if len(items) <= n else [items[(2 * i + 1) * len(items) // (2 * n)] for i in range(n)]


def prompts(val_files, n, context=320):
    """Up to n prompts from the held-out files outside test folders, spread evenly over the files (ceil(n / files)
    from each, evenly spread over its candidates, then n of those evenly spread): a candidate is the `context`
    bytes (whole lines) before a def/class line whose signature fits one line, the line itself up to its colon,
    and the newline, indentation and opening quotes of its docstring if the next line starts one."""
    by_file = []
    for f in val_files:
        rel, text = f["path"], f["text"]
        if re.search(r"(^|/)tests?(/|_)|/idle_test/", rel):
            continue
        candidates = []
        for m in DEF_LINE.finditer(text):
            # End at the colon, or after the docstring's opening quotes: never on whitespace, which the GPT-2
            # pattern would make a token of its own that training text rarely has there ("\n" before an
            # indented line, a trailing " ").
            end = m.start() + len(m.group().rstrip())
            first = text[m.end() + 1:m.end() + 200].split("\n", 1)[0]
            if first.strip().startswith(('"""', "'''")):
                end = m.end() + 1 + len(first) - len(first.lstrip()) + 3
            begin = text.rfind("\n", 0, max(0, m.start() - context)) + 1 if m.start() > context else 0
            prompt = text[begin:end]
            if 64 <= len(prompt.encode()) <= 600 and end < len(text) - 64:
                candidates.append((rel, m.start(), prompt))
        if candidates:
            by_file.append(candidates)
    per_file = -(-n // max(1, len(by_file)))                                 # ceil(n / files)
    pool = [c for cs in by_file for c in spread(cs, per_file)]
    chosen = spread(pool, n)
    return [{"id": f"py{i:02d}-{rel.replace('/', '.')}:{pos}", "prompt": p} for i, (rel, pos, p) in enumerate(chosen)]


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------

def write_atomic(path: str, data: str):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


def doc_link(package, root):
    """The package whose documentation folder usr/share/doc/<package> links to (Debian links those of packages
    built from one source to one of them), or None when it is a real folder."""
    doc = os.path.join(root, "usr", "share", "doc", package)
    return os.path.basename(os.readlink(doc)) if os.path.islink(doc) else None


def copyright_file(package, found):
    root = found[package][2]
    owner = doc_link(package, root) or package
    return os.path.join(found[owner][2], "usr", "share", "doc", owner, "copyright")


def collect(found, log):
    """(files, table): every kept file {"package", "path", "text", "licence"} in PACKAGES order, and per package
    {"version", "sha256", "licence" (how the copyright file was read), "copyright" (its text),
    "kept": Counter(licence -> files), "left_out": Counter(licence -> files), "duplicates": 0 (for the caller)}."""
    files, table = [], {}
    for package, stated in PACKAGES:
        version, digest, root = found[package]
        copyright_path = copyright_file(package, found)
        with open(copyright_path, encoding="utf-8") as f:
            copyright_text = f.read()
        try:
            paragraphs = [(patterns, licence or stated or "") for patterns, licence in parse_copyright(copyright_text)]
            how = "DEP-5" + (f", unnamed licence read as {stated}" if stated else "")
        except ValueError as e:
            if stated is None:
                sys.exit(f"corpus: {copyright_path}: {e}; read it and give its licence in PACKAGES")
            paragraphs = [(["*"], stated)]
            how = f"free-form, read as {stated}"
        row = {"version": version, "sha256": digest, "licence": how, "copyright": copyright_text,
               "kept": collections.Counter(), "left_out": collections.Counter(), "duplicates": 0}
        for rel, text in package_files(root):
            licence = file_licence(paragraphs, rel)
            if is_permissive(licence):
                row["kept"][licence] += 1
                files.append({"package": package, "path": f"{package}/{rel}", "text": text, "licence": licence})
            else:
                row["left_out"][licence or "(no licence)"] += 1
        table[package] = row
    log(f"licences: {len(files)} files kept, {sum(sum(r['left_out'].values()) for r in table.values())} left out")
    return files, table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default="tools/runs/debian")
    ap.add_argument("--out", default="tools/runs/corpus")
    ap.add_argument("--prompts", default="bench/prompts/python.jsonl")
    ap.add_argument("--versions", metavar="TSV", help="the package versions to fetch: a packages.tsv written before")
    ap.add_argument("--new-prompts", type=int, metavar="N", help="cut N new prompts instead of keeping the file's")
    args = ap.parse_args()
    t0 = time.time()
    log = lambda msg: print(f"corpus: {msg} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    versions = {}
    if args.versions:
        with open(args.versions, encoding="utf-8") as f:
            versions = dict(line.split("\t")[:2] for line in f.read().split("\n")[1:] if line)
    found = fetch([p for p, _ in PACKAGES], args.cache, log, versions)
    owners = {doc_link(p, root) for p, (_, _, root) in found.items()} - set(found) - {None}
    found.update(fetch(sorted(owners), args.cache, log))      # for their copyright files only
    candidates, table = collect(found, log)
    files, dropped = deduplicate(candidates, log)
    for i in dropped:
        table[candidates[i]["package"]]["duplicates"] += 1
    old_prompts = []
    if args.new_prompts is None:
        with open(args.prompts, encoding="utf-8") as f:
            old_prompts = [json.loads(line)["prompt"] for line in f]
    train, val = split(files, old_prompts)
    leaked = [f["path"] for f in train if any(p in f["text"] for p in old_prompts)]
    if leaked:
        sys.exit(f"corpus: training files hold benchmark prompts: {leaked}")
    log(f"split: train {len(train)} files, val {len(val)} files")

    os.makedirs(os.path.join(args.out, "licenses"), exist_ok=True)
    for name, part in (("train", train), ("val", val)):
        write_atomic(os.path.join(args.out, name + ".jsonl"),
                     "".join(json.dumps({"path": f["path"], "text": f["text"]}) + "\n" for f in part))
    count = lambda c: ", ".join(f"{lic} {n}" for lic, n in sorted(c.items())) or "-"
    rows = []
    for package, _ in PACKAGES:
        r = table[package]
        write_atomic(os.path.join(args.out, "licenses", package), r["copyright"])
        rows.append(f"{package}\t{r['version']}\t{r['sha256']}\t{r['licence']}\t{count(r['kept'])}\t"
                    f"{count(r['left_out'])}\t{r['duplicates']}\n")
    write_atomic(os.path.join(args.out, "packages.tsv"),
                 "package\tversion\tdeb_sha256\tcopyright_file\tkept\tleft_out\tduplicates\n" + "".join(rows))
    if args.new_prompts is not None:
        ps = prompts(val, args.new_prompts)
        write_atomic(args.prompts, "".join(json.dumps(p) + "\n" for p in ps))
        log(f"{len(ps)} new prompts -> {args.prompts}")
    val_paths = {f["path"] for f in val}
    write_atomic(os.path.join(args.out, "manifest.tsv"),
                 "".join(f"{'val' if f['path'] in val_paths else 'train'}\t"
                         f"{hashlib.sha256(f['text'].encode()).hexdigest()}\t{len(f['text'].encode())}\t"
                         f"{f['licence']}\t{f['path']}\n" for f in files))
    nb = lambda part: sum(len(f["text"].encode()) for f in part)
    log(f"{len(files)} files, {nb(files)} bytes; train {len(train)} files {nb(train)} bytes, "
        f"val {len(val)} files {nb(val)} bytes -> {args.out}")


if __name__ == "__main__":
    main()
