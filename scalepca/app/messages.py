"""Messages in the words of the command line: the library's messages name Python
arguments; the CLI rewrites them here into config keys (``run``, ``validate``) or
flags (``transform``).
"""

from __future__ import annotations

#: library wording → (wording for a config: run/validate, wording for command-line
#: flags: transform). The library's messages name Python arguments; the CLI rewrites
#: them here, in one place, instead of every library message knowing about configs and
#: flags.
_CLI_WORDS = (
    (r"pass variable=\.\.\.", "set data.variable", "pass --variable"),
    (r"\blayer=None\b", "data.layer: null", "a model fitted on X"),
    (r"\bwith layer=\.\.\.", "with data.layer", "with the model's layer"),
    (r"pass sample_dims=\(\.\.\.\)", "set data.sample_dims", "pass --sample-dims"),
    (r"\bpass sample_dims\b", "set data.sample_dims", "pass --sample-dims"),
    (r"(?<![\w.-])sample_dims\b", "data.sample_dims", "--sample-dims"),
    (r"(?<![\w.-])feature_dims\b", "data.feature_dims", "the feature dimensions"),
    (r"^weights\b", "data.weights", "--weights"),
    (r"(?<![\w.-])storage_options\b", "data.storage_options", "--storage-options"),
    (r"^[XM] (?=has|contains|is)", "the data ", "the data "),
    # a lazy transform's refusal of a NaN, raised by the block that holds it
    (
        r"^a row block of [XM] (?=contains)",
        "a row block of the data ",
        "a row block of the data ",
    ),
)


def _method_of_class(name: str) -> str | None:
    from ..persistence.registry import METHODS

    return next(
        (m for m, target in METHODS.items() if target.endswith(f":{name}")), None
    )


def param_key(name: str) -> str:
    """The config key of the estimator parameter ``name``: ``model.<name>``, but
    ``model.params.method`` for one named method (``model.method`` names the
    estimator)."""
    if name == "method":
        return "model.params.method"
    return f"model.{name}"


def speak_cli(
    message: str, *, command: str | None = None, method: str | None = None
) -> str:
    """``message`` with Python argument syntax replaced by config keys or command-line
    flags.

    ``command`` is the subcommand (``transform`` speaks flags, the others config keys);
    ``method`` the config's ``model.method``, whose estimator parameters become
    ``model.<name>: value`` (``n_components=3`` → ``model.n_components: 3``), and an
    estimator call like ``PPCA(missing='em')`` becomes ``model.method: ppca with
    model.missing: em``.
    """
    import re

    flags = command == "transform"
    for pattern, as_config, as_flag in _CLI_WORDS:
        message = re.sub(pattern, as_flag if flags else as_config, message)
    if flags:
        return message
    from ..models._params import table_of
    from ..persistence.registry import METHODS, estimator_class

    def params_of(m):
        return set(table_of(estimator_class(m)))

    def keys(text: str, names: set) -> str:
        def one(match):
            key, value = param_key(match.group(1)), match.group(3)
            if value:
                return f"{key}: {value}"
            return key

        alternatives = "|".join(sorted(names, key=len, reverse=True))
        text = re.sub(
            rf"(?<![\w.'\"-])({alternatives})=(['\"]?)([^\s,;)'\"]*)\2", one, text
        )
        return re.sub(
            rf"(?<![\w.'\"-])({alternatives})(?= must\b)",
            lambda match: param_key(match.group(1)),
            text,
        )

    classes = "|".join(target.split(":")[1] for target in METHODS.values())

    def call(match):
        m = _method_of_class(match.group(1))
        if not match.group(2):  # no arguments
            return f"model.method: {m}"
        return f"model.method: {m} with {keys(match.group(2), params_of(m))}"

    message = re.sub(rf"\b({classes})\(([^()]*)\)", call, message)
    if method in METHODS:
        message = keys(message, params_of(method))
    return message


def scheduler_lost(err: BaseException) -> str | None:
    """What ``scalepca: job failed:`` says when the job lost its dask scheduler (None
    for any other error): distributed cancels every pending result with the internal
    key of one of them, which tells a user neither what happened nor what to do."""
    cancelled = ("FutureCancelledError", "FuturesCancelledError")
    if type(err).__name__ not in cancelled or "scheduler-connection-lost" not in str(
        err
    ):
        return None
    return (
        "lost the connection to the dask scheduler mid-run (its host, its process or "
        "the network went away); start a scheduler and run the same command again: a "
        "fit with model.checkpoint resumes from its last commit, any other starts over"
    )


#: botocore's errors of a request that got no answer (no connection, a timeout, a
#: connection closed mid-answer), raised once its retries are spent; matched by name
#: (any class of the error's MRO) so that botocore need not be imported
_NO_ANSWER = ("ConnectionError", "HTTPClientError")


def store_unreachable(err: BaseException) -> str | None:
    """What ``scalepca: job failed:`` says when an object store did not answer (None
    for any other error): botocore's message names the object's URL but not that the
    retries are spent, nor which settings govern them."""
    names = {k.__name__ for k in type(err).__mro__}
    if "BotoCoreError" not in names or not names & set(_NO_ANSWER):
        return None
    kwargs = getattr(err, "kwargs", None) or {}
    url = kwargs.get("endpoint_url") or ""
    where = f" at {url}" if url else ""
    return (
        f"the object store did not answer{where} after its retries "
        f"({type(err).__name__}: {err}); check that it is reachable from every "
        "worker, or change the retries and timeouts in data.storage_options."
        "config_kwargs (output.storage_options for outputs): connect_timeout, "
        "read_timeout, retries"
    )
