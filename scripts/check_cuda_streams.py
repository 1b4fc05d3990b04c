#!/usr/bin/env python3
"""Source check: every CUDA operation in Tessel names its stream, and none uses the legacy one.

Tessel's device stream and kernel contexts are non-blocking streams: they are not ordered with
the legacy default stream (stream 0). Work enqueued there, or by a synchronous API that uses it
(cudaMemcpy, cudaMemset, ...), would race with the tensors and reused allocator blocks of the
device's stream. This script scans the sources for such calls and exits 1 listing each finding as
`file:line: rule: text`, except those in ALLOWED (each with its reason; an entry that matches
nothing is itself a finding, so the list cannot go stale).

  check_cuda_streams.py ROOT         scan ROOT's src/ and include/ (exit 0: clean, 1: findings)
  check_cuda_streams.py --self-test  checks the checker on snippets that must and must not fail
"""

import os
import re
import sys

SCANNED_DIRS = ["src", "include"]
EXTENSIONS = (".cu", ".cuh", ".cpp", ".hpp", ".h", ".cc")

# (path relative to the root, rule, text the finding's line contains, why it is right there)
ALLOWED = [
    ("src/core/device_memory_cuda.cu", "raw-allocation", "cudaMalloc(&p, bytes)",
     "the caching allocator itself: a fresh block has no pending work"),
    ("src/core/device_memory_cuda.cu", "raw-allocation", "cudaFree(p)",
     "the caching allocator returns blocks to the driver after cudaDeviceSynchronize"),
    ("src/core/device_memory_cuda.cu", "device-synchronize", "cudaDeviceSynchronize()",
     "before the allocator frees cached blocks, every stream must be done with them"),
    ("src/core/device_memory_cuda.cu", "null-stream-variable", "cudaStream_t created = nullptr",
     "out-parameter of cudaStreamCreateWithFlags(..., cudaStreamNonBlocking), checked"),
    ("src/core/device_memory_cuda.cu", "raw-allocation", "cudaHostAlloc(&p, bytes",
     "pinned staging cache; its blocks are used only by copies that wait for their stream"),
    ("src/core/device_memory_cuda.cu", "raw-allocation", "cudaFreeHost(p)",
     "pinned staging cache; a block is released only after its copy was waited for"),
    ("src/sampling/cuda/device_graph.cu", "raw-allocation", "cudaHostAlloc(&host_",
     "the sampler's graph in mapped pinned memory, written by the host before any kernel"),
    ("src/sampling/cuda/device_graph.cu", "raw-allocation", "cudaFreeHost(host_)",
     "freed with the graph, after the sampler's stream was synchronized by the last sample()"),
    ("src/sampling/cuda/device_graph.cu", "raw-allocation", "cudaFree(ptr_)",
     "the sampler's private buffers: its stream is synchronized after every use"),
    ("src/sampling/cuda/device_graph.cu", "raw-allocation", "cudaMalloc(&ptr_",
     "the sampler's private buffers, used only on its own stream"),
    ("src/sampling/cuda/device_graph.cu", "null-stream-variable", "cudaStream_t own_stream = nullptr",
     "member default; the constructor creates a non-blocking stream before any use"),
    ("src/sampling/cuda/device_feature_store.cu", "raw-allocation", "cudaFreeHost(host_rows)",
     "the owned rows in mapped pinned memory, freed with the store"),
    ("src/sampling/cuda/device_feature_store.cu", "raw-allocation", "cudaFreeHost(slot.ptr)",
     "a staging slot is regrown only after the event recorded behind its last copy completed"),
    ("src/sampling/cuda/device_feature_store.cu", "raw-allocation", "cudaHostAlloc(&slot.ptr",
     "pinned staging ring for the store's uploads on the device's stream"),
    ("src/sampling/cuda/device_feature_store.cu", "raw-allocation", "cudaHostAlloc(&g.host_rows",
     "the owned rows in mapped pinned memory, read by the gather kernel over UVA"),
    ("src/kernels/cuda/resources.cuh", "null-stream-variable", "cudaStream_t stream = nullptr",
     "member default; the constructor assigns a non-blocking stream before any use"),
]

# API -> (arguments a call needs so the stream is passed explicitly, index of the stream)
STREAM_ARGUMENT = {
    "cudaMemcpyAsync": (5, 4),
    "cudaMemsetAsync": (4, 3),
    "cudaMemcpy2DAsync": (8, 7),
    "cudaMemset2DAsync": (6, 5),
    "cudaMemcpyPeerAsync": (6, 5),
    "cudaMallocAsync": (3, 2),
    "cudaFreeAsync": (2, 1),
    "cudaEventRecord": (2, 1),
    "cudaStreamSynchronize": (1, 0),
    "cudaStreamWaitEvent": (2, 0),
    "cudaLaunchKernel": (6, 5),
    "cudaLaunchHostFunc": (3, 0),
    "ncclAllReduce": (7, 6),
    "ncclBroadcast": (7, 6),
    "ncclReduce": (8, 7),
    "ncclAllGather": (6, 5),
    "ncclReduceScatter": (7, 6),
    "ncclSend": (6, 5),
    "ncclRecv": (6, 5),
}

SYNCHRONOUS = re.compile(
    r"\bcuda(Memcpy|Memset)(2D|3D|Peer|ToSymbol|FromSymbol|2DToArray|2DFromArray)?\s*\(")
LEGACY_NAMES = re.compile(r"\bcudaStream(Legacy|PerThread)\b")
BLOCKING_CREATE = re.compile(r"\bcudaStreamCreate\s*\(")
DEFAULT_FLAG = re.compile(r"\bcudaStreamCreateWith(Flags|Priority)\s*\(")
DEVICE_SYNC = re.compile(r"\bcudaDeviceSynchronize\s*\(")
RAW_ALLOCATION = re.compile(
    r"\bcuda(Malloc|MallocManaged|MallocHost|MallocPitch|Free|HostAlloc|FreeHost)\s*\(")
NULL_STREAM_VARIABLE = re.compile(r"\bcudaStream_t\s+\w+\s*(=\s*(nullptr|0|NULL)|\{\s*\})\s*;")
CUB_CALL = re.compile(r"\bcub::Device\w+::\w+\s*\(")
THRUST = re.compile(r"\bthrust::\w+")
LIBRARY_CREATE = {"cublasCreate": "cublasSetStream", "cusparseCreate": "cusparseSetStream"}
NULL_STREAMS = {"0", "nullptr", "NULL", "cudaStreamLegacy", "cudaStreamPerThread", "{}",
                "cudaStream_t{}", "(cudaStream_t)0", "cudaStream_t(0)", "cudaStream_t{0}",
                "static_cast<cudaStream_t>(0)", "static_cast<cudaStream_t>(nullptr)"}


def strip_comments_and_strings(text):
    """Blanks comments and string/char literals, keeping line breaks (so lines still count)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # (a quote after a digit or letter is a digit separator, as in 1'000)
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * max(0, min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_arguments(text, start):
    """Arguments of the call whose '(' is at text[start]: (list of stripped arguments, end)."""
    depth, args, current = 0, [], []
    i = start
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
            if depth > 1:
                current.append(c)
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return [a for a in args if a] if args != [""] else [], i
            current.append(c)
        elif c == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    return None, len(text)


def squash(s):
    return re.sub(r"\s+", "", s)


def is_null_stream(arg):
    return squash(arg) in NULL_STREAMS


def check_text(path, text):
    """Findings (line, rule, message) of one file's text."""
    code = strip_comments_and_strings(text)
    lines = text.split("\n")
    findings = []

    def line_of(pos):
        return code.count("\n", 0, pos) + 1

    def add(pos, rule, message):
        findings.append((line_of(pos), rule, message))

    for m in SYNCHRONOUS.finditer(code):
        add(m.start(), "synchronous-api",
            f"{m.group(0)[:-1].strip()} runs on the legacy default stream; use the Async form "
            "on the device's stream")
    for m in LEGACY_NAMES.finditer(code):
        add(m.start(), "legacy-stream", f"{m.group(0)} is not ordered with the device's stream")
    for m in BLOCKING_CREATE.finditer(code):
        add(m.start(), "blocking-stream",
            "cudaStreamCreate makes a blocking stream; use cudaStreamCreateWithFlags("
            "..., cudaStreamNonBlocking)")
    for m in DEFAULT_FLAG.finditer(code):
        args, _ = split_arguments(code, m.end() - 1)
        if args is not None and not any("cudaStreamNonBlocking" in a for a in args):
            add(m.start(), "blocking-stream", f"{m.group(0)[:-1].strip()} without "
                "cudaStreamNonBlocking")
    for m in DEVICE_SYNC.finditer(code):
        add(m.start(), "device-synchronize",
            "cudaDeviceSynchronize waits for every stream; synchronize the stream that did "
            "the work")
    for m in RAW_ALLOCATION.finditer(code):
        add(m.start(), "raw-allocation",
            f"{m.group(0)[:-1].strip()} outside the caching allocator (device_memory)")
    for m in NULL_STREAM_VARIABLE.finditer(code):
        add(m.start(), "null-stream-variable",
            "a cudaStream_t initialized to the legacy default stream")
    for name, (count, index) in STREAM_ARGUMENT.items():
        for m in re.finditer(r"\b" + name + r"\s*\(", code):
            args, _ = split_arguments(code, m.end() - 1)
            if args is None:
                continue
            if len(args) < count:
                add(m.start(), "implicit-stream",
                    f"{name} with {len(args)} arguments leaves the stream to its default (0)")
            elif is_null_stream(args[index]):
                add(m.start(), "null-stream", f"{name} on stream {args[index]}")
    for m in re.finditer(r"<<<", code):
        end = code.find(">>>", m.end())
        if end < 0:
            continue
        args, _ = split_arguments("(" + code[m.end():end] + ")", 0)
        if args is None or len(args) < 4:
            add(m.start(), "launch-without-stream",
                "kernel launch without a stream argument runs on the legacy default stream")
        elif is_null_stream(args[3]):
            add(m.start(), "null-stream", f"kernel launch on stream {args[3]}")
    for m in CUB_CALL.finditer(code):
        args, _ = split_arguments(code, m.end() - 1)
        if args is not None and (not args or "stream" not in args[-1]):
            add(m.start(), "implicit-stream",
                f"{m.group(0)[:-1].strip()} must pass the stream as its last argument")
    for m in THRUST.finditer(code):
        line = code[code.rfind("\n", 0, m.start()) + 1:code.find("\n", m.start())]
        if not re.search(r"par(_nosync)?\.on\s*\(", line):
            add(m.start(), "implicit-stream",
                "thrust without thrust::cuda::par.on(stream) runs on the legacy default stream")
    for create, bind in LIBRARY_CREATE.items():
        for m in re.finditer(r"\b" + create + r"\s*\(", code):
            if not re.search(r"\b" + bind + r"\s*\(", code):
                add(m.start(), "unbound-handle",
                    f"{create} in a file that never calls {bind}: the handle would use stream 0")
    return [(line, rule, message, lines[line - 1].strip() if line <= len(lines) else "")
            for line, rule, message in findings]


def allowed_entry(path, rule, source_line):
    for i, (a_path, a_rule, a_text, _) in enumerate(ALLOWED):
        if a_path == path and a_rule == rule and squash(a_text) in squash(source_line):
            return i
    return None


def scan(root):
    findings, used = [], set()
    for top in SCANNED_DIRS:
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(EXTENSIONS):
                    continue
                full = os.path.join(directory, name)
                path = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for line, rule, message, source in check_text(path, text):
                    entry = allowed_entry(path, rule, source)
                    if entry is None:
                        findings.append(f"{path}:{line}: {rule}: {message}: {source}")
                    else:
                        used.add(entry)
    for i, (path, rule, text, _) in enumerate(ALLOWED):
        if i not in used:
            findings.append(f"{path}: stale allowance ({rule}, '{text}') matches nothing: "
                            "remove it from ALLOWED in scripts/check_cuda_streams.py")
    return findings


# Snippets the checker must flag with the given rule, and snippets it must accept.
BAD = [
    ("synchronous-api", "void f(float* d, const float* h) { cudaMemcpy(d, h, 4, "
     "cudaMemcpyHostToDevice); }"),
    ("synchronous-api", "void f(float* d) {\n  cudaMemset (d, 0, 4);\n}"),
    ("legacy-stream", "void f(float* d) { cudaMemsetAsync(d, 0, 4, cudaStreamLegacy); }"),
    ("blocking-stream", "void f() { cudaStream_t s; cudaStreamCreate(&s); }"),
    ("blocking-stream", "void f() { cudaStream_t s; cudaStreamCreateWithFlags(&s, "
     "cudaStreamDefault); }"),
    ("device-synchronize", "void f() { cudaDeviceSynchronize(); }"),
    ("raw-allocation", "void f() { void* p; cudaMalloc(&p, 64); cudaFree(p); }"),
    ("null-stream-variable", "void f() {\n  cudaStream_t stream = nullptr;\n  g(stream);\n}"),
    ("implicit-stream", "void f(float* d, const float* s) { cudaMemcpyAsync(d, s, 4, "
     "cudaMemcpyDeviceToDevice); }"),
    ("null-stream", "void f(float* d) { cudaMemsetAsync(d, 0, 4, nullptr); }"),
    ("null-stream", "void f(Resources& r) { k<<<1, 32, 0, 0>>>(r.x); }"),
    ("launch-without-stream", "void f(float* y) { kernel<<<blocks_for(n), kThreads>>>(n, y); }"),
    ("launch-without-stream", "void f(float* y) { kernel<<<g, b, 0>>>(y); }"),
    ("implicit-stream", "void f() { cub::DeviceScan::InclusiveSum(t, b, in, out, n); }"),
    ("implicit-stream", "void f() { thrust::sort(thrust::device, a, a + n); }"),
    ("null-stream", "void f() { ncclAllReduce(a, a, n, ncclFloat, ncclSum, comm, 0); }"),
    ("implicit-stream", "void f(cudaEvent_t e) { cudaEventRecord(e); }"),
    ("null-stream", "void f() { cudaStreamSynchronize(0); }"),
    ("unbound-handle", "void f() { cublasHandle_t h; cublasCreate(&h); }"),
]
GOOD = [
    "void f(Resources& r, float* d, const float* h) {\n"
    "  cudaMemcpyAsync(d, h, 4, cudaMemcpyHostToDevice, r.stream);\n"
    "  cudaMemsetAsync(d, 0, 4, stream());\n"
    "  kernel<<<blocks_for(n), kThreads, 0, r.stream>>>(n, d);\n"
    "  cub::DeviceScan::InclusiveSum(t, b, d, d, n, stream);\n"
    "  cudaStreamSynchronize(r.stream);\n"
    "}\n",
    "// cudaMemcpy(d, h, 4, cudaMemcpyHostToDevice) in a comment is fine\n"
    "void f() { fail(\"cudaMalloc of {} bytes failed\"); }\n",
    "/* kernel<<<1, 1>>>(x) in a block comment */ int x = 1'000;\n",
    "void f() { cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }\n",
    "void f() { cublasCreate(&h); cublasSetStream(h, s); cusparseCreateCsr(&a, 1, 1); }\n",
    "void f() { auto v = std::vector<int>{1, 2}; if (a < b && c >>> 0) {} }\n",
]


def self_test():
    failures = []
    for rule, snippet in BAD:
        rules = [r for _, r, _, _ in check_text("snippet.cu", snippet)]
        if rule not in rules:
            failures.append(f"not flagged as {rule} (got {rules}): {snippet!r}")
    for snippet in GOOD:
        found = check_text("snippet.cu", snippet)
        if found:
            failures.append(f"flagged {[(r, m) for _, r, m, _ in found]}: {snippet!r}")
    # An allowance that matches nothing is reported, so the list cannot hide a moved call.
    for failure in failures:
        print(f"self-test: {failure}")
    print(f"self-test: {len(BAD)} bad and {len(GOOD)} good snippets, {len(failures)} failures")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    findings = scan(argv[1])
    for finding in findings:
        print(finding)
    print(f"check_cuda_streams: {len(findings)} finding(s) in {', '.join(SCANNED_DIRS)}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
