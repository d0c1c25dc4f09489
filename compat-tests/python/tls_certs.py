"""Test certificates made with openssl when a test runs (no private key is kept in the tree): a
CA, and for each of broker, admin and alice a key, a certificate for localhost/127.0.0.1 with
subject CN=<name>,OU=test, and a PKCS12 store of both (password given)."""
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d, password):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=sluice test CA", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name in ("broker", "admin", "alice"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/OU=test/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "san.cnf", cwd=d)
        openssl("pkcs12", "-export", "-in", f"{name}.pem", "-inkey", f"{name}.key", "-certfile", "ca.pem",
                "-name", name, "-out", f"{name}.p12", "-passout", f"pass:{password}", cwd=d)
    return d
