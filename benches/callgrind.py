#!/usr/bin/env python3
"""Instructions per request through `threadbase serve`, counted by callgrind: the figure to
compare two builds with (wall-clock time moves with whatever else the machine runs).

    python3 benches/callgrind.py BINARY BENCH_DIR/<size> poll|parent [N]

BENCH_DIR/<size> is a database `benches/serve.rs` seeded (THREADBASE_BENCH_DIR, and for an
older build the seeding of its own bench: it cannot open a newer schema). The script sends a
warm-up round of 16 requests (polls by id of closed leaves, or `list parent` of the bench's 16
target tops), waits 4 s so the cache filler keeps their answers, then N (default 60) requests;
it does the same with 10·N and prints (I(10N) − I(N)) / 9N. serve's timers (the row watcher,
the owners' check) run during the requests too: count on an idle machine, where both runs
take about as long as their requests do.
"""
import json, os, re, sqlite3, subprocess, sys, time

BLOCK, TARGETS = 111, 16  # benches/serve.rs: a top's subtree and the targets a row cycles


def requests(fx, kind, size):
    usable = max(size // BLOCK, 1)
    tops = [(2 * i + 1) * usable // (2 * TARGETS) for i in range(TARGETS)]
    if kind == "parent":
        return [{"action": "list", "parent": f"/root/task_{b:06d}"} for b in tops]
    db = sqlite3.connect(f"file:{fx}/bench.sqlite?mode=ro", uri=True)
    try:
        return [{"action": "poll", "id": db.execute(
            "SELECT id FROM threads WHERE path LIKE ? AND status = 'closed' ORDER BY path LIMIT 1",
            (f"/root/task_{b:06d}/%/%",)).fetchone()[0]} for b in tops]
    finally:
        db.close()


def instructions(binary, fx, reqs, count):
    out = f"/tmp/callgrind-{os.getpid()}-{count}.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THREADBASE_", "PI_"))}
    env["PI_CODING_AGENT_DIR"] = f"{fx}/agent"
    serve = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
         "--db", f"{fx}/bench.sqlite", "serve", "--session-file", f"{fx}/sessions/main.jsonl",
         "--cwd", fx],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        cwd=fx, env=env, text=True)

    def ask(n):
        serve.stdin.write("".join(
            json.dumps({"id": i, "method": "thread", "params": reqs[i % len(reqs)]}) + "\n"
            for i in range(n)))
        serve.stdin.flush()
        answered = 0
        while answered < n:
            line = serve.stdout.readline()
            if not line:
                sys.exit("serve ended before it answered every request")
            if '"result"' in line or '"error"' in line:
                answered += 1

    ask(len(reqs))
    time.sleep(4)
    ask(count)
    serve.stdin.close()
    serve.wait()
    with open(out) as f:
        total = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    os.unlink(out)
    return int(total.group(1))


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[3] not in ("poll", "parent"):
        sys.exit(__doc__)
    binary, fx, kind = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) == 5 else 60
    size = int(os.path.basename(fx))
    reqs = requests(fx, kind, size)
    a = instructions(binary, fx, reqs, n)
    b = instructions(binary, fx, reqs, 10 * n)
    print(f"{binary} {size} {kind}: {(b - a) / (9 * n):.0f} instructions a request")


if __name__ == "__main__":
    main()
