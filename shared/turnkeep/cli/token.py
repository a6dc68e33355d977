"""`turnkeep token`: sign a Cognito user in and print a token for `chat --url` and the console.

The stack's own user pool (template.yaml, `CreateUserPool`) has an app client without a secret
that allows `USER_PASSWORD_AUTH`, so a user name and password are all it takes. The token is
printed alone on stdout (`TURNKEEP_API_TOKEN=$(turnkeep token ...)`); the password comes from
`TURNKEEP_PASSWORD` or a prompt, never from the command line. A user an administrator invited
signs in with the temporary password once and sets a new one (`TURNKEEP_NEW_PASSWORD` or a
prompt). docs/sign-in.md.
"""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TextIO

from turnkeep.runtime.config_errors import CONFIG_EXIT_STATUS

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient

PASSWORD_ENV = "TURNKEEP_PASSWORD"  # nosec B105  # the variable's name, not a password
NEW_PASSWORD_ENV = "TURNKEEP_NEW_PASSWORD"  # nosec B105  # the variable's name
CLIENT_ID_ENV = "TURNKEEP_COGNITO_CLIENT_ID"

Prompt = Callable[[str], str]


class SignInError(Exception):
    """Cognito refused the sign-in, or asked for something this command does not answer."""


def add_token_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `token` subcommand's arguments."""
    token = sub.add_parser(
        "token",
        help="sign in to the stack's Cognito user pool and print a token",
        description="Sign a user in to a Cognito user pool app client (no secret, "
        "USER_PASSWORD_AUTH) and print the access token alone on stdout. The password is read "
        f"from {PASSWORD_ENV} or prompted for.",
    )
    token.add_argument(
        "--client-id",
        default=os.environ.get(CLIENT_ID_ENV),
        help=f"the app client id (the stack output UserPoolClientId; default ${CLIENT_ID_ENV})",
    )
    token.add_argument("--username", required=True, help="the user's name (their e-mail)")
    token.add_argument("--region", default=None, help="the pool's region (default: AWS config)")
    token.add_argument(
        "--id-token", action="store_true", help="print the ID token instead of the access token"
    )


def sign_in(
    client: CognitoIdentityProviderClient,
    client_id: str,
    username: str,
    password: str,
    new_password: Callable[[], str],
) -> Mapping[str, str]:
    """The tokens (`AccessToken`, `IdToken`, ...) of a password sign-in; a first sign-in with a
    temporary password sets `new_password()`. SignInError when Cognito refuses."""
    from botocore.exceptions import ClientError

    try:
        answer = client.initiate_auth(
            ClientId=client_id,
            AuthFlow="USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": username, "PASSWORD": password},
        )
        if answer.get("ChallengeName") == "NEW_PASSWORD_REQUIRED":
            answer = client.respond_to_auth_challenge(
                ClientId=client_id,
                ChallengeName="NEW_PASSWORD_REQUIRED",
                Session=answer["Session"],
                ChallengeResponses={"USERNAME": username, "NEW_PASSWORD": new_password()},
            )
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise SignInError(
            f"sign-in refused ({error.get('Code', 'error')}): {error.get('Message', exc)}"
        ) from None
    challenge = answer.get("ChallengeName")
    if challenge:
        raise SignInError(
            f"Cognito asks for {challenge}, which this command does not answer "
            "(use `aws cognito-idp initiate-auth`, docs/sign-in.md)"
        )
    result = answer.get("AuthenticationResult") or {}
    return {k: v for k, v in result.items() if isinstance(v, str)}


def run_token(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    *,
    prompt: Prompt = getpass.getpass,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """`turnkeep token`: 0 and the token on `out`; 1 when refused; 2 for a missing setting."""
    if not args.client_id:
        err.write(f"turnkeep token: --client-id (or {CLIENT_ID_ENV}) is required\n")
        return CONFIG_EXIT_STATUS
    try:
        import boto3
        from botocore.exceptions import BotoCoreError
    except ImportError:
        err.write("turnkeep token: needs boto3 (pip install 'turnkeep[aws]')\n")
        return CONFIG_EXIT_STATUS
    password = environ.get(PASSWORD_ENV) or prompt(f"Password for {args.username}: ")

    def new_password() -> str:
        return environ.get(NEW_PASSWORD_ENV) or prompt("New password (first sign-in): ")

    try:
        client = boto3.client("cognito-idp", region_name=args.region)
        tokens = sign_in(client, args.client_id, args.username, password, new_password)
    except SignInError as exc:
        err.write(f"turnkeep token: {exc}\n")
        return 1
    except BotoCoreError as exc:  # no region configured, no network, ...
        err.write(f"turnkeep token: {exc}\n")
        return CONFIG_EXIT_STATUS if "region" in str(exc).lower() else 1
    key = "IdToken" if args.id_token else "AccessToken"
    if key not in tokens:
        err.write(f"turnkeep token: Cognito's answer holds no {key}\n")
        return 1
    out.write(tokens[key] + "\n")
    return 0
