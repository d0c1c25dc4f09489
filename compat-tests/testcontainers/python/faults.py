"""The fault-injection endpoint from the command line (docs/fault-injection.md), for tests in
other languages: `faults.py URL add '{"action": ...}'`, `faults.py URL requests`,
`faults.py URL rules`, `faults.py URL reset`, `faults.py URL refuse true|false`."""

import json
import sys
import urllib.request


def call(url, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def main(url, command, arg=None):
    if command == "add":
        result = call(url, "POST", "/faults", json.loads(arg))
    elif command == "requests":
        result = call(url, "GET", "/requests")
    elif command == "rules":
        result = call(url, "GET", "/faults")["rules"]
    elif command == "reset":
        result = call(url, "DELETE", "/faults")
    elif command == "refuse":
        result = call(url, "POST", "/faults/connections", {"refuse": arg == "true"})
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
