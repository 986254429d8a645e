"""The product's errors: one family for every failure any layer raises on purpose.

It lives in the lake because the lake is the bottom layer: every layer can raise and catch
these, and nothing here knows what sits above. Nor does it know HTTP: the API maps each class
to a status (`episodelake.api.errors.STATUS`, the most specific class wins) and answers one
JSON shape; the CLI prints any of them as one line. Messages name what was wrong and, where
there is one, the next thing to do.

```
EpisodeLakeError                 anything raised on purpose (catch this for "a product error")
    InvalidInput(ValueError)     bad data from a caller: an image that is not one, a NaN reward
    NotFound(LookupError)        no such episode, set, tag, job ...
    Conflict                     contradicts what is stored (a duplicate step, a finished episode)
    LakeError                    the lake itself: storage and queries
        SqlRefused               the SQL sandbox refused a statement
        LakeCorrupt              stored data does not read back
    DeviceError                  a phone or environment server
        DeviceUnavailable        nothing to drive; the next step is in the message
        EnvironmentLost          stopped answering mid-episode
        ActionFailed             this one action could not be carried out
```

Siblings are separate on purpose: a device that went away is not a storage failure, so code
that handles the lake's errors (`except LakeError`) never swallows a lost phone. Families
grow where their raisers live (the writer's `CommitFailed` is a `LakeError`, the API's
`Unauthorized` an `EpisodeLakeError`); every class needs a status in the API's table, which a
test checks.

Two classes also inherit the builtin that means the same thing, so a caller may catch either
way: `except ValueError` catches `InvalidInput`, `except LookupError` catches `NotFound`
(`except KeyError` does not: a missing episode is not a missing key of a mapping). No class
inherits an `OSError` (not even `TimeoutError`, whose meaning `StoreSilent` shares): code
around file and network I/O catches `OSError` to retry or to describe a failed call, and must
never take a product error for one. One consequence to know: pydantic turns a `ValueError`
raised in a validator into a `ValidationError`, so an `InvalidInput` a model's check raises
arrives inside one (`episodelake.lake.vocab.spec_model.raised` hands it back unchanged).
"""

from __future__ import annotations


class EpisodeLakeError(Exception):
    """Base of every error the product raises on purpose."""

    @property
    def kind(self) -> str:
        """The name clients see (the API's `error.type`, a job's recorded error)."""
        return type(self).__name__


class InvalidInput(EpisodeLakeError, ValueError):
    """Bad data from a caller: an image that is not one, a NaN reward, a bad id. Also a
    `ValueError`, so `except ValueError` catches it."""


class NotFound(EpisodeLakeError, LookupError):
    """What was asked for is not there (an episode, a set, a tag, a job). Also a
    `LookupError` (not a `KeyError`), so `except LookupError` catches it."""


class Conflict(EpisodeLakeError):
    """The request contradicts what is stored (a duplicate step, a finished episode)."""


class NotAllowed(EpisodeLakeError):
    """A person may not do this to this thing (someone else's saved query, say)."""


# -- the lake: storage and queries -------------------------------------------------------------
class LakeError(EpisodeLakeError):
    """The lake could not store or read what was asked; no input of the caller's is at fault."""


class SqlRefused(LakeError):
    """The SQL sandbox refused a statement (writes, file access, settings, limits)."""


class LakeCorrupt(LakeError):
    """Stored data could not be read back; `elake recover` is the next step."""


# -- devices and environments ------------------------------------------------------------------
class DeviceError(EpisodeLakeError):
    """A phone or an environment server failed; see the subclasses for what the loop does."""


class DeviceUnavailable(DeviceError):
    """Nothing to drive (no device, unauthorized, no healthy server); the next step is in the
    message."""


class EnvironmentLost(DeviceError):
    """The device or server stopped answering mid-episode: the episode is recorded as aborted
    with its steps, and the next episode may go elsewhere."""


class ActionFailed(DeviceError):
    """This one action could not be carried out (rejected by the server, missing input
    method): the step is kept with the reason and the episode goes on."""


class BranchDiverged(DeviceError):
    """A branch's replay of its parent's recorded actions did not reach the parent's screen
    (`elake branch`): the message names the episode and the step that diverged, and nothing
    of that branch is recorded."""
