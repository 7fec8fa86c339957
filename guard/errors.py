"""Provider failures. Everything a provider can go wrong with becomes one of these,
so screening can apply the fail mode and never lets an exception escape into the turn."""

from __future__ import annotations


class GuardProviderError(Exception):
    """A provider did not produce an assessment. ``transient`` failures are retried."""

    transient: bool = False
    code: str = "provider_error"

    def __init__(self, message: str, *, raw_output: str = "") -> None:
        super().__init__(message)
        self.raw_output = raw_output


class GuardTimeout(GuardProviderError):
    transient = True
    code = "timeout"


class GuardUnavailable(GuardProviderError):
    """Connection refused or reset, HTTP 5xx or 429: worth another try."""

    transient = True
    code = "unavailable"


class GuardRejected(GuardProviderError):
    """HTTP 4xx other than 429: the request or the configuration is wrong; retrying will not help."""

    code = "rejected"


class GuardMalformedOutput(GuardProviderError):
    """The provider answered, but not in its documented format."""

    code = "malformed_output"


class GuardMisconfigured(GuardProviderError):
    code = "misconfigured"
