"""Check server responses against OpenAI's official OpenAPI specification.

The reference is the vendored ``tests/spec/openapi.yaml`` (see
``tests/spec/README.md``).  Its ``#/components/schemas`` are loaded once per
process (cached as JSON between runs), rewritten into plain JSON Schema 2020-12
(see :func:`to_json_schema`) and validated with :mod:`jsonschema`.

Entry points:

* :func:`validate` -- assert that one document conforms to a named schema.
* :func:`schema_for` -- which schema a response of a given endpoint must meet.
* :func:`checked_get` / :func:`checked_post` -- `httpx.get` / `httpx.post`, checked.
* :class:`ValidatingTransport` / :class:`AsyncValidatingTransport` -- httpx
  transports that check every response passing through them, including each
  server-sent event of a stream as it arrives, and record every violation in a
  :class:`ConformanceLog`, so a session-level fixture can fail the run even if a
  client library swallowed the :class:`ConformanceError` raised at the time::

      log = ConformanceLog()
      client = openai.OpenAI(
          base_url="http://127.0.0.1:8000/v1",
          api_key="sk-test",
          http_client=httpx.Client(transport=ValidatingTransport(log)),
      )
      ...
      log.assert_clean()

Spec quirks handled here (beyond OpenAPI's own keywords):

* OpenAPI 3.0-style ``nullable: true`` inside a 3.1 document, including next
  to ``enum`` and ``$ref``; JSON Schema ignores it, so it is rewritten.
* ``Model`` (and a few other schemas) list ``properties`` without
  ``type: object``, so JSON Schema would accept a bare string as a model;
  such schemas are made objects.
* The streamed chunks of ``POST /v1/completions`` are documented as
  ``CreateCompletionResponse``, whose ``finish_reason`` and ``usage`` may not
  be null, yet every chunk but the last carries ``"finish_reason": null`` (the
  spec's own streaming example does), and with ``stream_options.include_usage``
  "all other chunks will also include a ``usage`` field, but with a null
  value" (``ChatCompletionStreamOptions``, which ``CreateCompletionRequest``
  uses too).  Streams are checked against the synthetic
  :data:`COMPLETION_STREAM_SCHEMA`, identical but for those two fields.
"""

from __future__ import annotations

from tests.conformance.log import ConformanceLog, Violation, default_log
from tests.conformance.routes import schema_for
from tests.conformance.schemas import (
    COMPLETION_STREAM_SCHEMA,
    RESPONSE_STREAM_SCHEMA,
    SPEC_PATH,
    ConformanceError,
    check,
    load_schemas,
    to_json_schema,
    validate,
)
from tests.conformance.transport import (
    AsyncValidatingTransport,
    ValidatingTransport,
    async_validating_client,
    checked_get,
    checked_post,
    checked_request,
    validating_client,
)

__all__ = [
    "COMPLETION_STREAM_SCHEMA",
    "RESPONSE_STREAM_SCHEMA",
    "SPEC_PATH",
    "AsyncValidatingTransport",
    "ConformanceError",
    "ConformanceLog",
    "ValidatingTransport",
    "Violation",
    "async_validating_client",
    "check",
    "checked_get",
    "checked_post",
    "checked_request",
    "default_log",
    "load_schemas",
    "schema_for",
    "to_json_schema",
    "validate",
    "validating_client",
]
