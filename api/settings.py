"""The API server's settings: one typed object, loaded once and validated at start-up.

Defaults live here and nowhere else. The token comes from the environment (`ELAKE_TOKEN`),
never from the command line, so it does not show in the process list.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from episodelake.lake import layout
from episodelake.lake.errors import InvalidInput

TOKEN_ENV = "ELAKE_TOKEN"
CORS_ENV = "ELAKE_CORS_ORIGINS"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8799
#: Hosts that need no token: the machine's own loopback names. Everything else (0.0.0.0,
#: a LAN address, even another 127.x address) is treated as shared and needs a token.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Where `just web` puts the built app, first match wins.
STATIC_CANDIDATES = (Path(__file__).parent / "static", Path(__file__).parent.parent / "web" / "dist")


def default_static_dir() -> Path | None:
    return next((p for p in STATIC_CANDIDATES if (p / "index.html").is_file()), None)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    lake: Path
    host: str = DEFAULT_HOST
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    token: str | None = Field(None, min_length=16, description="required for any non-loopback bind")
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = Field(1 << 20, ge=1024, description="larger request bodies get 413")
    sql_max_rows: int = Field(10_000, ge=1)
    sql_max_bytes: int = Field(8 << 20, ge=1024, description="a SQL result stops before its rows pass "
                               "this many bytes (as JSON in the response, and as Arrow data in the "
                               "sandbox), with `truncated` set")
    sql_timeout_s: float = Field(10.0, gt=0)
    page_size: int = Field(50, ge=1)
    max_page_size: int = Field(500, ge=1)
    static_dir: Path | None = Field(default_factory=default_static_dir)
    exports_dir: Path | None = Field(None, description="where exports started through the API are "
                                     "written, one folder per export (default: <lake>/_exports)")
    job_start_wait_s: float = Field(10.0, ge=0, description="how long starting a job waits for its "
                                    "checks, so bad input is answered as an error, not a failed job")
    job_progress_interval_s: float = Field(5.0, gt=0, description="a running job's progress is "
                                           "written to the lake's jobs table at most this often")

    @model_validator(mode="after")
    def _token_for_shared_binds(self) -> Settings:
        if self.host not in LOCAL_HOSTS and not self.token:
            raise InvalidInput(
                f"binding {self.host} exposes the lake to other machines: set {TOKEN_ENV} to a "
                f"secret of at least 16 characters (e.g. `export {TOKEN_ENV}=$(openssl rand -hex 16)`), "
                f"or bind {DEFAULT_HOST}"
            )
        return self

    @property
    def exports_root(self) -> Path:
        return self.exports_dir if self.exports_dir is not None else layout.exports_root(self.lake)

    @property
    def local_only(self) -> bool:
        return self.host in LOCAL_HOSTS

    @classmethod
    def from_env(cls, lake: Path | str, **overrides) -> Settings:
        """Settings for `lake`, taking the token and CORS origins from the environment."""
        env: dict = {}
        if os.environ.get(TOKEN_ENV):
            env["token"] = os.environ[TOKEN_ENV]
        if os.environ.get(CORS_ENV):
            env["cors_origins"] = tuple(o.strip() for o in os.environ[CORS_ENV].split(",") if o.strip())
        try:
            return cls(lake=Path(lake), **{**env, **overrides})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise InvalidInput(f"server settings: {problems}") from None
