# ruff: noqa: E501  (long templated data lines)
"""Assemble tests/data/notes_corpus.txt: ordinary working-notes lines (deterministic, seeded).

Hand-written prose and code lines (including prose about keys and passwords, placeholders and
key-format descriptions) plus seeded variations of paths, ids, hashes, UUIDs, URLs and commit
SHAs. Re-run only to regenerate the committed file: `python tests/data/make_notes_corpus.py`.
"""

import base64
import hashlib
import random
import string
import uuid
from pathlib import Path

rng = random.Random(9)


def hexs(n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def alnum(n, alphabet=string.ascii_letters + string.digits):
    return "".join(rng.choice(alphabet) for _ in range(n))


def u():
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


lines = []
prose = """We decided to keep SQLite for local mode; DynamoDB stays the AWS backend.
The user prefers short answers with code first, explanation after.
Deploy window is Tuesday 14:00-16:00 UTC; avoid Fridays.
Rotate the bearer token every 90 days (ops handles it, not us).
The password must be at least 12 characters and include a digit.
Never paste API keys into notes; use the secrets manager reference instead.
Remember: the staging database password lives in SSM under /staging/db.
Access keys start with AKIA; we never store them here.
A JWT always starts with eyJ because of the base64 of {"alg".
The team uses sk-learn, not scikit-learn, as the import alias in notebooks.
Bearer auth is configured at the gateway, not in the app.
User asked to remember that their cat is called Biscuit.
Meeting notes: agreed to drop Python 3.10 support in the next release.
The secret to fast builds is caching the wheel directory.
API key rotation is scheduled for Q3; owner is the platform team.
The token bucket refills 10 tokens per second with a burst of 20.
Use the access token from the OAuth flow; it expires after one hour.
Client secret is stored in the vault, path kv/apps/portal.
Password reset emails go through SES in eu-west-1.
The passphrase prompt appears only on first boot.
Prefer pathlib over os.path in new code.
Tests must run in under 10 minutes on 2 cores.
Customer wants CSV export with UTF-8 BOM for Excel.
The flaky test was caused by a race in the retry loop; fixed by a fake clock.
Don't use "secret" as a variable name; the linter flags it.
TODO: check whether the model supports tool calls in streaming mode.
Invoice numbering restarts each fiscal year (April 1).
Latency budget: p95 under 300 ms for GET endpoints.
The user's timezone is Europe/Berlin.
Use British spelling in customer-facing docs.
Release 2.4.1 fixed the memory leak in the uploader.
On-call rotation: Alice this week, Bob next week.
The CI cache key includes the lockfile hash.
Gradle build needs JDK 17; JDK 21 breaks the annotation processor.
Summaries should be three bullet points at most.
Ask before running migrations on the shared staging database.
When the user says "ship it" they mean open a PR, not deploy.
The vendor's sandbox resets every night at midnight PST.
Feature flag new-checkout is at 25% rollout.
Error budget for the month is 43 minutes of downtime.
They want the report as a PDF, landscape, A4.
Keep answers in German unless the user writes in English.
The parser chokes on CRLF line endings; normalise first.
Monthly cost alert threshold is 500 USD.
Use tabs in the Makefile, spaces everywhere else.
Do not suggest Kubernetes; the team runs everything on ECS.
The password field on the signup form should allow paste.
API keys are scoped per environment: dev, staging, prod.
We hash passwords with argon2id, memory cost 64 MiB.
Session cookies are HttpOnly, Secure, SameSite=Lax.
The OAuth callback URL must match exactly, including the trailing slash.
Remember that the backup job runs at 02:00 and takes ~40 minutes.
The migration 0042 is irreversible; take a snapshot first.
The user is learning Rust; explain ownership with small examples.
Favourite editor: Neovim with the LazyVim distribution.
Lunch order for the offsite: 12 vegetarian, 3 vegan.
Their product is called Turnkeep; lowercase in code, capitalised in prose.
The sprint ends on the 14th; demo on the 15th.
Token limits: 200k context, 8k output for the default model.
"password: see vault" is how we write it in runbooks.
The secret manager ARN is in the stack outputs, not here.
Store only references like ssm:/prod/db/password, never values.
password: minimum-12-characters (policy)
Password: at-least-8-chars, one symbol
token: 3 per minute
secret: 42
api_key: required
secret=True
access_token: null
auth_token: none (anonymous users)
client_secret: see 1Password item 'Portal OAuth'
API key format: AIza followed by 35 characters.
AKIA + 16 characters is an access key id; ASIA is a temporary one.
GitHub tokens start with ghp_ and fine-grained ones with github_pat_.
Slack bot tokens start with xoxb-, user tokens with xoxp-.
Stripe live keys start with sk_live_; never use them in tests.
-----BEGIN CERTIFICATE----- blocks are public; private keys are not.
The Bearer scheme is case-insensitive per RFC 6750.
""".strip().splitlines()
lines += prose
more_prose_subjects = [
    "the uploader",
    "the billing job",
    "the search index",
    "the auth service",
    "the chat widget",
    "the export",
    "the nightly ETL",
    "the mobile app",
    "the admin panel",
    "the webhook relay",
    "the cache layer",
    "the scheduler",
]
more_prose_verbs = [
    "was refactored to use",
    "now depends on",
    "should stop calling",
    "is blocked on",
    "was migrated to",
    "needs a test for",
    "logs too much about",
    "times out when talking to",
]
more_prose_objects = [
    "the new queue",
    "the legacy API",
    "Redis 7",
    "Postgres 16",
    "the S3 bucket",
    "the CDN",
    "the feature store",
    "the rate limiter",
    "the payment provider",
    "the email service",
]
for _ in range(160):
    lines.append(
        f"{rng.choice(more_prose_subjects).capitalize()} {rng.choice(more_prose_verbs)} {rng.choice(more_prose_objects)} (ticket {rng.choice(['OPS', 'WEB', 'API', 'DATA'])}-{rng.randint(100, 9999)})."
    )
code = r"""def load_config(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))
password = getpass.getpass("Password: ")
api_key = os.environ["OPENAI_API_KEY"]
token = get_secret("github/token")
client_secret = settings.client_secret
secret = vault.read("kv/data/app")["data"]["secret"]
password_hash = argon2.hash(password)
if not check_password(user, password):
SELECT id, email FROM users WHERE created_at > now() - interval '7 days';
UPDATE accounts SET password_reset_at = NULL WHERE id = $1;
const apiKey = process.env.STRIPE_API_KEY;
export AWS_PROFILE=staging
export DATABASE_URL=postgres://localhost:5432/app
aws s3 sync ./dist s3://my-bucket/site --delete
docker run --rm -p 8080:8080 ghcr.io/acme/api:2.4.1
kubectl -n payments rollout restart deploy/api
git rebase -i HEAD~3
git log --oneline --since=2.weeks
pytest -q -x tests/unit/test_api_turns.py -k cancel
ruff check . && ruff format . && mypy shared/turnkeep
python -m turnkeep.api --port 8787
curl -s -H 'Authorization: Bearer $TOKEN' localhost:8787/sessions
curl -s -H "Authorization: Bearer ${API_TOKEN}" https://api.example.com/v1/me
password: ${DB_PASSWORD}
api_key: <your key here>
secret: {{ .Values.secret }}
access_token: '***'
auth_token = "xxxxxxxxxxxx"
client_secret=%(client_secret)s
PASSWORD=changeme
password: hunter
password = input()
secret: my-app-secret-name
apiKey: process.env.API_KEY
for (const [key, value] of Object.entries(env)) {
return {"statusCode": 200, "body": json.dumps(payload)}
with open("notes.md", "a", encoding="utf-8") as fh:
assert response.status_code == 401
raise ValueError(f"unknown model {spec!r}")
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
CREATE INDEX idx_entries_seq ON entries (session_id, seq);
resource "aws_dynamodb_table" "sessions" {
  billing_mode = "PAY_PER_REQUEST"
FROM python:3.12-slim AS build
RUN pip install --no-cache-dir -r requirements.txt
server { listen 443 ssl; server_name example.org; }
crontab: 0 2 * * * /usr/local/bin/backup.sh
npm install --save-dev typescript@5.4.5
go test ./... -run TestRetry -count=1
cargo build --release --target x86_64-unknown-linux-musl
terraform plan -var-file=staging.tfvars
make test BENCH_ARGS=--smoke
""".strip("\n").splitlines()
lines += code
funcs = [
    "parse",
    "load",
    "save",
    "render",
    "fetch",
    "retry",
    "validate",
    "encode",
    "decode",
    "migrate",
]
things = [
    "config",
    "session",
    "token_bucket",
    "invoice",
    "report",
    "user",
    "event",
    "frame",
    "entry",
    "scope",
]
for _ in range(120):
    f, t = rng.choice(funcs), rng.choice(things)
    lines.append(
        rng.choice(
            [
                f"def {f}_{t}(self, {t}_id: str) -> {t.title().replace('_', '')}:",
                f"    {t} = {f}_{t}(request.{t}_id)",
                f"{t}s = [{f}(item) for item in {t}_ids]",
                f'logger.info("{f} {t} %s took %.1f ms", {t}.id, elapsed * 1000)',
                f'self.assertEqual({f}_{t}("{alnum(6).lower()}"), {rng.randint(0, 999)})',
                f"const {t}Id = await {f}{t.title().replace('_', '')}(req.params.id);",
            ]
        )
    )
dirs = [
    "src",
    "lib",
    "shared/turnkeep",
    "tests/unit",
    "docs",
    "bench",
    "functions/api",
    "infra",
    "scripts",
    "notebooks",
]
names = [
    "app",
    "models",
    "views",
    "storage",
    "settings",
    "utils",
    "client",
    "server",
    "handler",
    "schema",
]
for _ in range(150):
    p = rng.choice(
        [
            f"/{rng.choice(['home/alice', 'srv', 'opt', 'var/lib'])}/{rng.choice(dirs)}/{rng.choice(names)}.{rng.choice(['py', 'ts', 'go', 'rs', 'md', 'yaml'])}",
            f"~/work/{rng.choice(names)}-{rng.randint(2019, 2026)}/{rng.choice(dirs)}/",
            f"C:\\Users\\bob\\Projects\\{rng.choice(names)}\\{rng.choice(names)}.cs",
            f"./{rng.choice(dirs)}/{rng.choice(names)}_{hexs(8)}.log",
            f"s3://acme-{rng.choice(['logs', 'artifacts', 'backups'])}/{rng.randint(2020, 2026)}/{rng.randint(1, 12):02d}/{hexs(12)}.parquet",
            f"/data/sk-{rng.randint(2019, 2026)}-{rng.choice(['runs', 'build-artifacts', 'experiments'])}/{rng.choice(names)}",
        ]
    )
    lines.append(
        rng.choice(["Output goes to ", "See ", "Edited ", "Config is in ", "", "Logs: "]) + p
    )
for _ in range(110):
    lines.append(
        rng.choice(["request id ", "trace ", "session ", "job ", "correlation-id: ", "tenant "])
        + u()
    )
for _ in range(110):
    sha = hexs(40)
    lines.append(
        rng.choice(
            [
                f"fixed in {sha}",
                f"reverted {sha[:7]}",
                f"commit {sha}",
                f"cherry-pick {sha[:12]} onto release/2.4",
                f"git show {sha}",
            ]
        )
    )
for _ in range(60):
    data = alnum(20).encode()
    lines.append(
        rng.choice(
            [
                f"sha256 of the release tarball: {hashlib.sha256(data).hexdigest()}",
                f"md5 {hashlib.md5(data).hexdigest()}  dist/app.tar.gz",
                f"image digest sha256:{hashlib.sha256(data).hexdigest()}",
                f'etag "{hashlib.md5(data).hexdigest()}"',
                f"content hash {base64.b64encode(hashlib.sha1(data).digest()).decode()}",
            ]
        )
    )
for _ in range(60):
    acct = rng.randint(10**11, 10**12 - 1)
    lines.append(
        rng.choice(
            [
                f"arn:aws:iam::{acct}:role/turnkeep-{rng.choice(names)}",
                f"arn:aws:states:eu-west-1:{acct}:stateMachine:turnkeep-turn",
                f"arn:aws:dynamodb:us-east-1:{acct}:table/turnkeep-sessions",
                f"account {acct}, region eu-central-1",
                f"arn:aws:lambda:us-east-1:{acct}:function:turnkeep-api:{rng.randint(1, 40)}",
            ]
        )
    )
for _ in range(110):
    lines.append(
        rng.choice(
            [
                f"https://github.com/acme/{rng.choice(names)}/pull/{rng.randint(1, 5000)}",
                f"https://docs.python.org/3/library/{rng.choice(['asyncio', 'sqlite3', 'pathlib', 'unicodedata', 're'])}.html#{rng.choice(names)}",
                f"https://console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/log-group/$252Faws$252Flambda$252F{rng.choice(names)}",
                f"https://example.com/search?q={rng.choice(things)}&page={rng.randint(1, 9)}&utm_source=newsletter",
                f"https://app.example.org/invoices/{u()}?download=1",
                f"https://jira.example.com/browse/{rng.choice(['OPS', 'WEB', 'API'])}-{rng.randint(1, 9999)}",
                f"http://127.0.0.1:{rng.randint(1024, 65535)}/docs",
                f"https://www.youtube.com/watch?v={alnum(11, string.ascii_letters + string.digits + '-_')}",
                f"https://drive.google.com/file/d/{alnum(33, string.ascii_letters + string.digits + '-_')}/view",
            ]
        )
    )
for _ in range(70):
    lines.append(
        rng.choice(
            [
                f"order #{rng.randint(10**6, 10**7)} shipped {rng.randint(1, 28)}.{rng.randint(1, 12)}.",
                f"pod api-{hexs(10)}-{alnum(5, string.ascii_lowercase + string.digits)} restarted {rng.randint(1, 9)} times",
                f"build {rng.randint(1000, 9999)} ({hexs(7)}) passed in {rng.randint(3, 59)}m{rng.randint(0, 59)}s",
                f"ULID {alnum(26, '0123456789ABCDEFGHJKMNPQRSTVWXYZ')}",
                f"Stripe customer cus_{alnum(14)} (test mode)",
                f"Slack channel C{alnum(10, string.ascii_uppercase + string.digits)} is #incidents",
                f"version {rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}-rc.{rng.randint(1, 5)}",
                f"IP allow-list: 10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.0/24",
                f"email {rng.choice(['alice', 'bob', 'carol'])}.{rng.choice(['smith', 'ng', 'garcia'])}@example.com",
                f"phone +49 30 {rng.randint(1000000, 9999999)}",
                f"base64 sample: {base64.b64encode(alnum(12).encode()).decode()}",
                "the JWT header is eyJhbGciOiJIUzI1NiJ9 (alg HS256)",
            ]
        )
    )
lines = list(dict.fromkeys(lines))  # distinct lines, first occurrence order
assert len(lines) >= 1000, len(lines)
Path(__file__).with_name("notes_corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
print(len(lines), len(set(lines)))
