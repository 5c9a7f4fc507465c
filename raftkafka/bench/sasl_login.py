"""SASL login cost: the CPU one SCRAM exchange takes on each side (the sans-IO mechanisms of
wire.security, no network), and a PLAIN check for comparison.

    python -m raftkafka.bench.sasl_login [--iterations 4096] [--logins 200]

The client derives the salted password (PBKDF2, `--iterations` rounds) on every login; the
server only computes HMACs over the stored keys, so its cost does not grow with iterations.
"""
from __future__ import annotations

import argparse
import random
import time

from wire.security.sasl_plain import PlainClient, PlainServer, static_users_check
from wire.security.sasl_scram import HASHES, ScramClient, ScramServer, credential_from_password, make_nonce


def _exchange(client, server) -> tuple[float, float]:
    """(client seconds, server seconds) of one full exchange."""
    spent = {"client": 0.0, "server": 0.0}

    def timed(side, fn, arg=None):
        start = time.perf_counter()
        out = fn() if arg is None else fn(arg)
        spent[side] += time.perf_counter() - start
        return out

    token = timed("client", client.initial)
    while not client.complete:
        token = timed("client", client.respond, timed("server", server.respond, token))
    return spent["client"], spent["server"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=4096)
    p.add_argument("--logins", type=int, default=200)
    args = p.parse_args(argv)
    rng = random.Random(1)
    rows = [("PLAIN", lambda: (PlainClient("u", "pw"), PlainServer(static_users_check({"u": "pw"}))))]
    for mech, hash_name in sorted(HASHES.items()):
        if mech == "SCRAM-SHA-1":
            continue
        cred = credential_from_password(hash_name, "pw", b"s" * 32, args.iterations)
        rows.append((mech, lambda mech=mech, cred=cred: (ScramClient(mech, "u", "pw", make_nonce(rng)),
                                                        ScramServer(mech, lambda user: cred, make_nonce(rng)))))
    print(f"{'mechanism':<14} {'client ms/login':>16} {'server us/login':>16}   ({args.logins} logins, "
          f"{args.iterations} iterations)")
    for name, make in rows:
        client_s = server_s = 0.0
        for _ in range(args.logins):
            c, s = _exchange(*make())
            client_s, server_s = client_s + c, server_s + s
        print(f"{name:<14} {client_s / args.logins * 1e3:>16.3f} {server_s / args.logins * 1e6:>16.1f}")


if __name__ == "__main__":
    main()
