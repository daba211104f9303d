"""Fixtures of the workers' tests: self-signed TLS certificates, made in the test (never shipped)."""
from __future__ import annotations

import subprocess

import pytest


def make_cert(folder, name: str = "node") -> tuple[str, str]:
    """A self-signed certificate and its key in ``folder``: (cert path, key path).

    With the ``cryptography`` package if installed, else the ``openssl`` command.
    """
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    try:
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN=ddflow-{name}"],
                       check=True, capture_output=True)
        return str(cert), str(key)
    k = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"ddflow-{name}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    c = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(k.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
         .sign(k, hashes.SHA256()))
    cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    key.chmod(0o600)
    return str(cert), str(key)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    """Two unrelated self-signed certificates: {"node": (cert, key), "stranger": (cert, key)}."""
    folder = tmp_path_factory.mktemp("tls")
    return {name: make_cert(folder, name) for name in ("node", "stranger")}
