"""The programs the NetworkPolicy tests run in their pods (not a test file), as Python source
for ``python3 -c``: the lab's python image and the test's own namespaces run the same ones.

- ``SERVER``: a pod's servers, TCP and UDP on 53, 80 and 81 (each answers ``ok``), and a
  control port, 9999, where a line of JSON targets ``[[ip, "tcp"|"udp", port], ...]`` is
  answered with a line of JSON booleans: whether this pod reached each, all probed at once;
  prints ``serving`` once listening.
- ``PROBER``: the same probes from wherever it runs, targets in ``argv[1]``.
- ``ASK``: from a node, each of its pods asked on its control port at once; ``argv[1]`` is
  ``[[key, pod ip, targets], ...]``, the answer ``{key: [booleans]}``.  A node's traffic to
  its own pods is never filtered, so asking never depends on the policies under test.
"""

from __future__ import annotations

PROBE = """
import json, socket, sys, threading
from concurrent.futures import ThreadPoolExecutor
def probe(target):
    ip, proto, port = target
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as s:
        s.settimeout(1.0)
        try:
            s.connect((ip, port))
            if proto == "udp":
                s.send(b"?")
            return s.recv(10) == b"ok"
        except OSError:
            return False
def probe_all(targets):
    with ThreadPoolExecutor(len(targets)) as pool:
        return list(pool.map(probe, targets))
"""

SERVER = (
    PROBE
    + """
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(128)
    while True:
        c, _ = s.accept(); c.sendall(b"ok"); c.close()
def udp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", port))
    while True:
        _, peer = s.recvfrom(100); s.sendto(b"ok", peer)
def control(c):
    with c, c.makefile("rw") as f:
        f.write(json.dumps(probe_all(json.loads(f.readline()))) + "\\n")
for port in (53, 80, 81):
    threading.Thread(target=tcp, args=(port,), daemon=True).start()
    threading.Thread(target=udp, args=(port,), daemon=True).start()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9999)); s.listen(128)
print("serving", flush=True)
while True:
    threading.Thread(target=control, args=(s.accept()[0],), daemon=True).start()
"""
)

PROBER = PROBE + "print(json.dumps(probe_all(json.loads(sys.argv[1]))))\n"

ASK = """
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
def ask(pod):
    key, ip, targets = pod
    with socket.create_connection((ip, 9999), timeout=10) as c, c.makefile("rw") as f:
        f.write(json.dumps(targets) + "\\n"); f.flush()
        return key, json.loads(f.readline())
pods = json.loads(sys.argv[1])
with ThreadPoolExecutor(len(pods)) as pool:
    print(json.dumps(dict(pool.map(ask, pods))))
"""

__all__ = ["ASK", "PROBER", "SERVER"]
