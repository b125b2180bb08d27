"""Helper of tests/test_auth_throttle.py: a peer that tries to connect with a wrong secret as
fast as it can, as a real subprocess.

    python tests/_auth_flood.py PS_ADDRESS SECONDS

Prints ``FLOODING`` when it starts, then after SECONDS one line ``RESULT {json}`` with how
many attempts got through to a proof check ("authentication failed") and how many the ps
task refused before any check (UnavailableError: too many failed authentications).
"""

from __future__ import annotations

import json
import sys
import time


def main(address: str, seconds: str) -> None:
    from psrt import _core, errors  # noqa: PLC0415

    failed = refused = other = 0
    print("FLOODING", flush=True)
    start = time.monotonic()
    end = start + float(seconds)
    while time.monotonic() < end:
        client = _core.Client("worker", 7, b"not the secret")
        try:
            client.connect(0, address, 2.0)
            other += 1
        except errors.UnauthenticatedError:
            failed += 1
        except errors.UnavailableError as e:
            if "too many failed authentications" in e.message:
                refused += 1
            else:
                other += 1
        finally:
            client.close()
    elapsed = time.monotonic() - start
    print("RESULT " + json.dumps({"failed": failed, "refused": refused, "other": other,
                                  "seconds": elapsed}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
