"""The HTTP API: `create_app(runtime, launcher, authenticator)`, launchers and authenticators.

Same app locally (`python -m turnkeep.api`: uvicorn, SQLite, in-process orchestrator, dev
tokens) and on Lambda (`functions/api/app.py`: Mangum, Step Functions, JWT claims).
"""

from turnkeep.api.app import create_app
from turnkeep.api.auth import (
    Authenticator,
    JwtClaimsAuthenticator,
    LocalDevAuthenticator,
    SamLocalAuthenticator,
    lambda_authenticator,
)
from turnkeep.api.errors import ApiError
from turnkeep.api.launch import Launcher, LaunchError, LocalLauncher, StepFunctionsLauncher
from turnkeep.api.settings import ApiSettings

__all__ = [
    "ApiError",
    "ApiSettings",
    "Authenticator",
    "JwtClaimsAuthenticator",
    "LaunchError",
    "Launcher",
    "LocalDevAuthenticator",
    "LocalLauncher",
    "SamLocalAuthenticator",
    "StepFunctionsLauncher",
    "create_app",
    "lambda_authenticator",
]
