"""The application on top of the library: the run pipeline (open → fit → write → summary),
the preflight behind ``validate`` and the command line's message wording. :mod:`scalepca.cli`
parses arguments and maps outcomes to exit codes; nothing in the library imports this package.
"""
