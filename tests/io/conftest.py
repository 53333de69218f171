"""An S3-compatible server of the tests' own (moto's standalone server on 127.0.0.1), with the sample's
synthetic part in bucket ``corpus`` under ``synthetic/`` and an empty bucket ``runs``; the process's
environment points s3fs at it (``AWS_ENDPOINT_URL``, as a user's would point at their store), and a new
process started by a test inherits that. ``stop()`` and ``start()`` take the endpoint down and up again
on the same port, its objects kept (the fault tests)."""

from __future__ import annotations

import socket

import pytest


class S3Server:
    def __init__(self) -> None:
        from moto import server

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._make = lambda: server.ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server = None

    def start(self) -> None:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self._server = self._make()
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.endpoint, "FSSPEC_S3_ENDPOINT_URL": self.endpoint}


@pytest.fixture(scope="module")
def s3_server(synthetic_src, tmp_path_factory):
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    import fsspec
    import s3fs

    srv = S3Server()
    srv.start()
    mp = pytest.MonkeyPatch()
    for k, v in srv.env.items():
        mp.setenv(k, v)
    mp.setenv("CORPUS_LAB_CACHE", str(tmp_path_factory.mktemp("cache")))  # working copies of stored runs
    fsspec.config.set_conf_env(fsspec.config.conf)  # FSSPEC_S3_* read now, as a new process would
    fs = s3fs.S3FileSystem(endpoint_url=srv.endpoint)
    for bucket in ("corpus", "runs"):  # moto's store is the process's: empty what another module left
        if fs.exists(bucket):
            fs.rm(bucket, recursive=True)
        fs.mkdir(bucket)
    fs.put(str(synthetic_src), "corpus/synthetic", recursive=True)
    s3fs.S3FileSystem.clear_instance_cache()
    srv.fs = fs
    yield srv
    s3fs.S3FileSystem.clear_instance_cache()
    mp.undo()
    fsspec.config.conf.pop("s3", None)
    srv.stop()


@pytest.fixture(scope="module")
def s3(s3_server):
    """The server's filesystem (s3fs)."""
    return s3_server.fs
