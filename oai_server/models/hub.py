"""Is a Hugging Face hub model there? Asked once per model before any engine starts.

vLLM finds out only inside the engine's start, minutes into a start with several models,
and says so in a long traceback while the server stays up answering 503. Asking the hub
(or, offline, its local cache) for the model's `config.json` first lets a model that can
never load stop the start at once, with one line naming it.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
)


class HubModelError(RuntimeError):
    """A hub model cannot be loaded; the message names it and why, in one line."""


def is_hub_id(model: str) -> bool:
    """Whether vLLM would look `model` up on the hub (it is no local directory)."""
    return not Path(model).expanduser().is_dir()


def check_hub_model(model: str) -> None:
    """Raise `HubModelError` unless the hub, or the local cache, has `model`."""
    try:
        hf_hub_download(model, "config.json")
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        # (Before the hub's own errors: the cache's "not here" is one of them.)
        why = "not in the local cache, and the hub cannot be reached"
    except RemoteEntryNotFoundError:
        return  # there, without a config.json of its own: vLLM decides what it is
    except GatedRepoError:
        why = "it is gated: set HF_TOKEN to a token with access"
    except RepositoryNotFoundError:
        why = "no such model on the hub (or it is private: set HF_TOKEN)"
    except HFValidationError:
        why = "not a hub id (org/name) and no directory by that name"
    except HfHubHTTPError as exc:
        why = f"the hub answered {exc.response.status_code if exc.response else 'an error'}"
    except OSError as exc:
        why = f"the hub cannot be reached ({type(exc).__name__})"
    else:
        return
    raise HubModelError(f"cannot load the model '{model}' from the Hugging Face hub: {why}")
