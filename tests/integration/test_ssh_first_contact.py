"""First contact over a real OpenSSH sshd on loopback, from a machine with no ~/.ssh yet: a missing
known_hosts is an unknown host key with the fix in words (strict), or is created 0600 in a 0700 directory
holding the first-seen key (accept-new), which later connections verify against and a changed key does
not pass; a missing identity file is named, whether hosts.toml or the SSH config names it.

HOME points at an empty directory for every test, and each host reads its own empty ssh_config: nothing
here reads or writes the real user's ~/.ssh."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolconsole.collect.hosts.sampling import sample_hosts
from poolconsole.config import parse_config
from poolconsole.model.hosts import HostSnapshot, HostState
from tests.helpers.sshd import FakeHost, Lab


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory without .ssh: the machine that has never used ssh."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def lab(tmp_path: Path, home: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path / "lab")
    yield lab
    lab.stop()


def host_toml(lab: Lab, host: FakeHost, *lines: str, identity_file: bool = True) -> str:
    """One host, the lab's client key (unless `lines` name another, or `identity_file` is false), and an
    empty ssh_config of its own unless `lines` name one."""
    ssh_config = lab.root / "ssh_config"
    if not ssh_config.exists():
        ssh_config.write_text("")
    given = {line.split("=")[0].strip() for line in lines}
    defaults = {"ssh_config": f'"{ssh_config}"'}
    if identity_file:
        defaults["identity_file"] = f'"{lab.client_key}"'
    return "\n".join(
        [
            "[settings]",
            "ssh_timeout_s = 3.0",
            "",
            "[[hosts]]",
            f'name = "{host.name}"',
            f'address = "{host.address}"',
            f"port = {host.port}",
            'user = "root"',
            *(f"{key} = {value}" for key, value in defaults.items() if key not in given),
            *lines,
            "",
        ]
    )


async def poll(toml: str) -> HostSnapshot:
    (snap,) = await sample_hosts(parse_config(toml))
    return snap


def key_of(host: FakeHost) -> str:
    """The server's public key as known_hosts holds it: "type base64"."""
    return " ".join(Path(f"{host.host_key}.pub").read_text().split()[:2])


def new_host_key(host: FakeHost, lab: Lab) -> None:
    """The host is reinstalled: same address and port, a different host key."""
    host.stop()
    host.host_key.unlink()
    Path(f"{host.host_key}.pub").unlink()
    host.setup(lab.client_pub)
    host.start()


@pytest.mark.parametrize("where", ["default", "configured"])
async def test_strict_without_known_hosts_is_an_unknown_key_naming_the_file(
    lab: Lab, home: Path, tmp_path: Path, where: str
) -> None:
    host = lab.add("fresh", {}, (), trust=False)
    if where == "default":  # ~/.ssh/known_hosts on a machine with no ~/.ssh
        path, lines = home / ".ssh" / "known_hosts", []
    else:
        path = tmp_path / "not-yet" / "known_hosts"
        lines = [f'known_hosts = "{path}"']
    snap = await poll(host_toml(lab, host, *lines))
    assert snap.state is HostState.HOST_KEY_UNKNOWN, snap.error
    error = snap.error or ""
    assert str(path) in error and f"127.0.0.1:{host.port}" in error
    assert f"ssh-keyscan -p {host.port} 127.0.0.1 >> {path}" in error
    assert f"mkdir -m 700 -p {path.parent}" in error  # the directory is missing too
    assert 'host_key_policy = "accept-new"' in error
    assert "No such file" not in error and "Traceback" not in error
    assert not path.exists() and not path.parent.exists()  # strict records nothing


@pytest.mark.parametrize("where", ["default", "configured"])
async def test_accept_new_creates_known_hosts_then_verifies_and_refuses_a_changed_key(
    lab: Lab, home: Path, tmp_path: Path, where: str
) -> None:
    host = lab.add("fresh", {}, (), trust=False)
    if where == "default":
        path, lines = home / ".ssh" / "known_hosts", ['host_key_policy = "accept-new"']
    else:
        path = tmp_path / "state" / "ssh" / "known_hosts"  # neither directory exists yet
        lines = ['host_key_policy = "accept-new"', f'known_hosts = "{path}"']
    snap = await poll(host_toml(lab, host, *lines))
    assert snap.state is HostState.OK, snap.error
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    if where == "configured":
        assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    recorded = path.read_text()
    assert recorded == f"[127.0.0.1]:{host.port} {key_of(host)}\n"

    # The next connections verify against the recorded key: strict now passes, and nothing is re-recorded.
    strict = [line for line in lines if "host_key_policy" not in line]
    snap = await poll(host_toml(lab, host, *strict))
    assert snap.state is HostState.OK, snap.error
    snap = await poll(host_toml(lab, host, *lines))
    assert snap.state is HostState.OK, snap.error
    assert path.read_text() == recorded

    # Reinstalled behind the same address and port: a changed key is refused, even under accept-new.
    old_key = key_of(host)
    new_host_key(host, lab)
    assert key_of(host) != old_key
    snap = await poll(host_toml(lab, host, *lines))
    assert snap.state is HostState.HOST_KEY_CHANGED, snap.error
    assert str(path) in (snap.error or "") and "ssh-keygen -R" in (snap.error or "")
    assert path.read_text() == recorded  # the new key was not recorded


async def test_missing_identity_file_is_named(lab: Lab, tmp_path: Path) -> None:
    host = lab.add("keyless", {}, ())
    missing = tmp_path / "keys" / "id_pool"
    snap = await poll(host_toml(lab, host, f'identity_file = "{missing}"', f'known_hosts = "{lab.known_hosts}"'))
    assert snap.state is HostState.AUTH_FAILED, snap.error
    error = snap.error or ""
    assert f"{missing} (identity_file for 127.0.0.1:{host.port} in hosts.toml) does not exist" in error
    assert "fix identity_file" in error and "No such file" not in error


async def test_missing_identity_file_from_ssh_config_is_named(lab: Lab, tmp_path: Path) -> None:
    host = lab.add("keyless", {}, ())
    missing = tmp_path / "keys" / "id_from_config"
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host 127.0.0.1\n    IdentityFile {missing}\n")
    lines = (f'ssh_config = "{ssh_config}"', f'known_hosts = "{lab.known_hosts}"')
    snap = await poll(host_toml(lab, host, *lines, identity_file=False))
    assert snap.state is HostState.AUTH_FAILED, snap.error
    error = snap.error or ""
    assert f"{missing}, named for 127.0.0.1:{host.port} in {ssh_config}, does not exist" in error
    assert "IdentityFile" in error and "No such file" not in error
