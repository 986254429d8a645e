"""The product's settings: one typed object each, loaded once and validated at start-up.

`EnvSettings` is every `ELAKE_*` environment variable the command line and the API server read
(`ELAKE_LAKE`, `ELAKE_TOKEN`, `ELAKE_CORS_ORIGINS`, `ELAKE_ENV_TOKEN`), read in one place by
pydantic-settings; a bad value is refused naming the variable. `Settings` is the server's own
configuration; it takes the environment's values through `Settings.from_env`, so a test or
another program that builds `Settings(...)` gets exactly what it passed, whatever the shell
exports. Defaults live here and nowhere else. Tokens come from the environment, never from the
command line, so they do not show in the process list.
"""

from __future__ import annotations

import socket
from pathlib import Path, PurePath
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from episodelake.lake.storage import layout
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.store import DEFAULT_LAKE
from episodelake.lake.vocab.spec_model import describe, raised

ENV_PREFIX = "ELAKE_"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8799
#: Hosts that need no token: the machine's own loopback names. Everything else (0.0.0.0,
#: a LAN address, even another 127.x address) is treated as shared and needs a token.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Binds that listen on every address: the Host a client uses could be any of the machine's.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
#: Where `just web` puts the built app, first match wins.
STATIC_CANDIDATES = (Path(__file__).parent / "static", Path(__file__).parent.parent / "web" / "dist")

#: The API server's bearer token: long enough that guessing it is hopeless.
Token = Annotated[str, Field(min_length=16)]


def machine_names() -> list[str]:
    """This machine's host name, full name and the addresses they resolve to."""
    names = {socket.gethostname(), socket.getfqdn()}
    for name in list(names):
        try:
            names.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
        except OSError:
            pass
    return sorted(n.lower() for n in names if n)


def default_static_dir() -> Path | None:
    return next((p for p in STATIC_CANDIDATES if (p / "index.html").is_file()), None)


#: A lake as text: a folder or a URI (`s3://bucket/prefix`). Never a `Path`, which would
#: fold `s3://` into `s3:/`; a `Path` given is taken as the folder it names.
LakeLocation = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, PurePath) else v)]


class EnvSettings(BaseSettings):
    """The `ELAKE_*` environment variables, one field each (`ELAKE_<FIELD>`); an empty
    variable counts as unset."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore",
                                      frozen=True)

    lake: LakeLocation = Field(DEFAULT_LAKE, description="the lake (a folder, or a URI such as "
                               "s3://bucket/prefix) when `--lake` is not given")
    token: Token | None = Field(None, description="the API server's bearer token (at least 16 "
                                "characters); required to bind anything but loopback")
    cors_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="comma-separated origins whose pages may call the API (e.g. a web app "
        "dev server, http://localhost:5173)")
    env_token: str | None = Field(None, description="bearer token of environment servers: sent by "
                                  "`elake collect remote`, required by `elake serve-env`")
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="comma-separated names the server answers to besides its own (the Host "
        "header of a request: e.g. the DNS name behind a proxy); * answers any")

    @field_validator("cors_origins", "allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(origin.strip() for origin in value.split(",") if origin.strip())
        return value

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable that sets `field`."""
        return ENV_PREFIX + field.upper()

    @classmethod
    def load(cls) -> EnvSettings:
        """The settings the environment holds; a bad value raises `InvalidInput` naming its
        variable (never echoing the value: it may be a secret)."""
        try:
            return cls()
        except ValidationError as exc:
            problems = describe(exc, name=lambda field: "$" + cls.variable(field), secret=lambda field: True)
            raise InvalidInput(f"{problems} (fix or unset the variable)") from None


TOKEN_ENV = EnvSettings.variable("token")


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    lake: LakeLocation
    host: str = DEFAULT_HOST
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    token: Token | None = Field(None, description="required for any non-loopback bind")
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = Field((), description="Host names the server answers to besides "
                                           "loopback, the bound address and this machine's names; * any")
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
    background_enrich: tuple[str, ...] = Field(("phash",), description="derived step columns a "
                                               "background worker fills as steps are committed "
                                               "(`elake enrich --what` names; empty: none)")

    def __init__(self, **data: Any) -> None:
        """As pydantic's, except that the error a check of this class raises (a shared bind
        without a token) is raised as it is, not inside a `ValidationError` (`InvalidInput`
        is a `ValueError`, which pydantic would report as a field's error)."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            own = raised(exc.errors(include_url=False))
            if own is None:
                raise
            raise own from None

    @field_validator("background_enrich")
    @classmethod
    def _known_derivations(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from episodelake.lake.derive.derivations import DERIVATIONS

        unknown = [name for name in value if name not in DERIVATIONS]
        if unknown:
            raise ValueError(f"unknown derivation(s) {unknown}; choose from {', '.join(DERIVATIONS)}")
        return value

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

    def host_names(self) -> list[str] | None:
        """The names a request's Host header may give (None: any, `allowed_hosts` has `*`).

        Loopback names always; the bound address; on a wildcard bind (0.0.0.0, ::) this
        machine's name, full name and addresses; and `allowed_hosts`. Checking the name on
        every bind keeps a page on another site from reaching the server through DNS
        rebinding, token or not."""
        if "*" in self.allowed_hosts:
            return None
        names = [*LOCAL_HOSTS, *self.allowed_hosts]
        if self.host in WILDCARD_HOSTS:
            names += machine_names()
        else:
            names.append(self.host)
        return names

    @classmethod
    def from_env(cls, environment: EnvSettings | None = None, **overrides: Any) -> Settings:
        """Settings for the lake, token and CORS origins of `environment` (default: this
        process's), with `overrides` (the command line's) taking precedence."""
        environment = EnvSettings.load() if environment is None else environment
        values = {"lake": environment.lake, "token": environment.token,
                  "cors_origins": environment.cors_origins, "allowed_hosts": environment.allowed_hosts}
        try:
            return cls(**{**values, **overrides})
        except ValidationError as exc:
            problems = describe(exc, secret=lambda field: field == "token")
            raise InvalidInput(f"server settings: {problems}") from None
