"""Redaction of process command lines: the secrets go, the rest of the command stays readable."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rigmon.redact import REDACTED as R
from rigmon.redact_cmdline import redact_argv, secret_name

HF = "hf_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"


@pytest.mark.parametrize(("argv", "expected"), [
    # --option=value and --option value
    (("python", "train.py", f"--hf-token={HF}"), ("python", "train.py", f"--hf-token={R}")),
    (("python", "train.py", "--wandb-key", "0123abcd"), ("python", "train.py", "--wandb-key", R)),
    (("python", "train.py", "--api-key", "k1", "--lr", "3e-4"), ("python", "train.py", "--api-key", R, "--lr", "3e-4")),
    (("python", "t.py", "--password=hunter2"), ("python", "t.py", f"--password={R}")),
    (("python", "t.py", "--db_pass", "hunter2"), ("python", "t.py", "--db_pass", R)),
    (("python", "t.py", "--apiKey", "k1", "--authToken=t1"), ("python", "t.py", "--apiKey", R, f"--authToken={R}")),
    (("python", "t.py", "--use_auth_token", "tok"), ("python", "t.py", "--use_auth_token", R)),
    (("python", "t.py", "--secret-access-key", "s", "--client-secret=c"),
     ("python", "t.py", "--secret-access-key", R, f"--client-secret={R}")),
    # env-like and Hydra assignments
    (("env", "HF_TOKEN=abc", "WANDB_API_KEY=def", "CUDA_VISIBLE_DEVICES=0,1", "python", "train.py"),
     ("env", f"HF_TOKEN={R}", f"WANDB_API_KEY={R}", "CUDA_VISIBLE_DEVICES=0,1", "python", "train.py")),
    (("python", "train.py", "wandb.api_key=abc", "+trainer.max_tokens=512", "model.tokenizer=gpt2"),
     ("python", "train.py", f"wandb.api_key={R}", "+trainer.max_tokens=512", "model.tokenizer=gpt2")),
    (("env", "PGPASSWORD=pw", "AWS_SECRET_ACCESS_KEY=x", "AWS_ACCESS_KEY_ID=AKIA1"),
     ("env", f"PGPASSWORD={R}", f"AWS_SECRET_ACCESS_KEY={R}", "AWS_ACCESS_KEY_ID=AKIA1")),
    # URLs: the user part and secret query values go, host and path stay
    (("git", "clone", "https://user:pw@github.com/org/repo.git"), ("git", "clone", f"https://{R}@github.com/org/repo.git")),
    (("python", "t.py", "--data=https://tok123@host/x"), ("python", "t.py", f"--data=https://{R}@host/x")),
    (("wget", "https://s3.example/b/o?X-Amz-Signature=abc&x=1"), ("wget", f"https://s3.example/b/o?X-Amz-Signature={R}&x=1")),
    (("python", "t.py", "--model", "https://huggingface.co/meta-llama/Llama-3-8B"),
     ("python", "t.py", "--model", "https://huggingface.co/meta-llama/Llama-3-8B")),
    # curl's user:password
    (("curl", "-u", "alice:pw", "https://h/"), ("curl", "-u", R, "https://h/")),
    (("curl", "--user=alice:pw"), ("curl", f"--user={R}")),
    (("curl", "-u", "alice"), ("curl", "-u", "alice")),
    # tokens of a known form, wherever they stand
    (("huggingface-cli", "login", HF), ("huggingface-cli", "login", R)),
    # a shell's command, word by word
    (("bash", "-c", f"HF_TOKEN={HF} python train.py --api-key k1 --epochs 3"),
     ("bash", "-c", f"HF_TOKEN={R} python train.py --api-key {R} --epochs 3")),
    # must survive: whole words only
    (("python", "t.py", "--tokenizer", "gpt2", "--max-tokens", "512", "--keep-last", "3"),
     ("python", "t.py", "--tokenizer", "gpt2", "--max-tokens", "512", "--keep-last", "3")),
    (("python", "t.py", "--key-file", "/etc/k.pem", "--text-key", "text", "--sort_key=name", "--tokens-per-batch", "8"),
     ("python", "t.py", "--key-file", "/etc/k.pem", "--text-key", "text", "--sort_key=name", "--tokens-per-batch", "8")),
    (("python", "t.py", "--no-auth", "data/", "--bypass", "x", "--compass=1"),
     ("python", "t.py", "--no-auth", "data/", "--bypass", "x", "--compass=1")),
    (("python", "t.py", "--api-key", "--verbose"), ("python", "t.py", "--api-key", "--verbose")),
    (("python", "-u", "train.py", "--config", "cfg.yaml"), ("python", "-u", "train.py", "--config", "cfg.yaml")),
    (("env", "PWD=/home/a", "TOKENIZERS_PARALLELISM=false"), ("env", "PWD=/home/a", "TOKENIZERS_PARALLELISM=false")),
    (("python", "t.py", "--hf-token="), ("python", "t.py", "--hf-token=")),
    # a process that rewrote its argv (setproctitle): its whole command line in argv[0]
    (("python train.py --wandb-key w4ndb --lr 1",), (f"python train.py --wandb-key {R} --lr 1",)),
    ((), ()),
])
def test_redact_argv(argv: tuple[str, ...], expected: tuple[str, ...]) -> None:
    assert redact_argv(argv) == expected


@pytest.mark.parametrize(("name", "secret"), [
    ("--hf-token", True), ("HF_TOKEN", True), ("--wandb_key", True), ("--key", True), ("--hftoken", True),
    ("--private-key", True), ("--credentials", True), ("GITHUB_TOKEN", True), ("db.password", True),
    ("--tokenizer", False), ("--max-tokens", False), ("--keep-last", False), ("--key-file", False),
    ("--text-key", False), ("--no-auth", False), ("--pwd", False), ("--token-budget", False), ("--monkey", False),
])
def test_secret_name(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


_SECRET = st.text(alphabet="abcdefXYZ0123456789", min_size=6, max_size=24).map(lambda s: "S3cr" + s)
_PLAIN = st.sampled_from(["--lr", "3e-4", "--tokenizer", "gpt2", "train.py", "--max-tokens", "512", "data/x.bin",
                          "--epochs", "-u", "CUDA_VISIBLE_DEVICES=0"])
_LEAK = st.sampled_from(["--hf-token={s}", "--api-key\0{s}", "HF_TOKEN={s}", "https://u:{s}@h/p", "--password\0{s}",
                         "wandb.api_key={s}", "-u\0me:{s}"])


@given(st.lists(_PLAIN, max_size=6), _LEAK, _SECRET, st.lists(_PLAIN, max_size=6))
def test_no_secret_survives_among_plain_arguments(before: list[str], leak: str, secret: str, after: list[str]) -> None:
    argv = ["python", *before, *leak.format(s=secret).split("\0"), *after]
    out = redact_argv(argv)
    assert secret not in " ".join(out)
    assert len(out) == len(argv)
    # The plain arguments are untouched.
    assert list(out[1:1 + len(before)]) == before and (not after or list(out[-len(after):]) == after)
