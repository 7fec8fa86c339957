"""Two hosts, one queue: a host killed mid-burst, every turn done exactly once on the other.

Two "hosts", each a network namespace made by the test with its own address on a veth pair (joined
by a bridge in the test's namespace, as machines on one network), its own hostname, and a ``/tmp``
and ``.data`` of its own (empty): each runs the run command's stage worker and an ASGI server.
PostgreSQL (a copy of the test database), Redis and the scripted LLM listen on the bridge's address
only, so every process reaches them over the link, never over loopback (a namespace's loopback is
its own). Customers open their conversation over REST on their host's web server and send their
message over its websocket, as the widget does. While the first wave's answers stream, every process
of host A is killed with SIGKILL (all the pids of its namespace); A's customers reconnect to B and
resume from their last sequence number, and a second wave arrives, A's part of it through B. Every
turn must end done exactly once: one ``done`` and one ``answer`` event, the whole answer shown to its
customer, no message lost or saved twice, and the turns A's worker held finished by B's worker.

Skipped, with the reason, only where network namespaces cannot be made (not root, no ``ip``, a
kernel or container that refuses them).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings

from devstack.outage import (Customers, Follower, conversation_open, http, services_start, sql, stack_env,
                             stage_worker_argv, web_argv)
from devstack.processes import ProcessGroup
from devstack.workers import worker_env
from guard.models import GuardExemplar
from supportdesk.models import Conversation, Message, Turn, TurnEvent
from tests.conftest import ROOT, content_seeded, until
from tests.llm_stub import ScriptedLLM

CUSTOMERS, FIRST_WAVE = 32, 20  # every other customer on each host's web server
WEB_PORT = 8000  # the same on both hosts: each has ports of its own
ANSWER = " ".join(f"word{i}" for i in range(24))  # streamed 0.15 s a word: ~4 s per answer
# Quick recovery, as the chaos test has it: a dead worker's stage is sent again within seconds.
RECOVERY = {"TURN_LEASE_SECONDS": "3", "TURN_RECOVERY_SWEEP_SECONDS": "1", "TURN_QUEUE_GRACE_SECONDS": "8",
            "STAGE_RETRY_BACKOFF": "0.5", "WS_CATCHUP_SECONDS": "2"}
UNFINISHED = ("queued", "guarding", "planning", "answering")


class NamespacesUnavailable(Exception):
    """Network namespaces cannot be made here; the message says why."""


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise NamespacesUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Host:
    name: str
    netns: str
    veth: str  # the test's end of its veth pair; the host's end is ``veth + "h"``
    address: str
    hostname: str  # its own (UTS namespace): in its workers' Celery node names and turn leases

    @property
    def base(self) -> str:
        return f"http://{self.address}:{WEB_PORT}"

    def argv(self, command: list[str]) -> list[str]:
        """``command`` on this host: its network, its hostname, an empty ``/tmp`` and ``.data`` (nothing
        it reads may come from the other hosts' disks). One process: each step execs the next."""
        # The checkout may itself be under /tmp (a CI clone): it is bound aside before /tmp is emptied and
        # bound back at its path after, so the host still runs the code but sees no other file of /tmp.
        script = ('hostname "$0" && mkdir -p /mnt && mount -t tmpfs tmpfs /mnt && mkdir /mnt/checkout && mount --bind "$1" /mnt/checkout'
                  ' && mount -t tmpfs tmpfs /tmp && mkdir -p "$1" && mount --bind /mnt/checkout "$1"'
                  ' && mount -t tmpfs tmpfs "$1/.data" && shift && exec "$@"')
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--mount", "sh", "-c", script,
                self.hostname, str(ROOT), *command]

    def pids(self) -> list[int]:
        return [int(pid) for pid in _ip("netns", "pids", self.netns).split()]

    def kill(self) -> None:
        """SIGKILL every process of the host (a forked one too), until none is left."""
        deadline = time.monotonic() + 10
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"host {self.name}'s processes {pids} outlived SIGKILL")
            time.sleep(0.05)


class Network:
    """A bridge (the test's side, ``gateway``) and two hosts on it, named after this process."""

    def __init__(self) -> None:
        tag = str(os.getpid())
        self.bridge = f"sd{tag}br"
        self.subnet = _free_subnet(int(tag))
        self.gateway = str(self.subnet.network_address + 1)
        self.hosts = [Host(name, f"sd2h-{tag}-{name}", f"sd{tag}{name}", str(self.subnet.network_address + number),
                           f"sd-host-{name}") for number, name in ((2, "a"), (3, "b"))]
        self.made: list[str] = []  # what to take down, in order

    def create(self) -> None:
        if os.geteuid() != 0:
            raise NamespacesUnavailable("making network namespaces needs root")
        for tool in ("ip", "unshare"):
            if shutil.which(tool) is None:
                raise NamespacesUnavailable(f"the `{tool}` command is missing")
        _stale_remove()
        prefix = self.subnet.prefixlen
        _ip("link", "add", self.bridge, "type", "bridge")
        self.made.append(f"link {self.bridge}")
        _ip("addr", "add", f"{self.gateway}/{prefix}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in self.hosts:
            _ip("netns", "add", host.netns)
            self.made.append(f"netns {host.netns}")
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", host.veth + "h", "netns", host.netns)
            _ip("link", "set", host.veth, "master", self.bridge, "up")
            inside = ("-n", host.netns)
            _ip(*inside, "addr", "add", f"{host.address}/{prefix}", "dev", host.veth + "h")
            _ip(*inside, "link", "set", host.veth + "h", "up")
            _ip(*inside, "link", "set", "lo", "up")
        (ROOT / ".data").mkdir(exist_ok=True)  # the mount point of each host's own .data (a fresh clone has none)
        probe = subprocess.run(self.hosts[0].argv(["true"]), capture_output=True, text=True)
        if probe.returncode:
            raise NamespacesUnavailable(f"a host's own hostname and /tmp cannot be made: {probe.stderr.strip()}")

    def destroy(self) -> None:
        for host in self.hosts:
            if f"netns {host.netns}" in self.made:
                try:
                    host.kill()
                except (AssertionError, NamespacesUnavailable):
                    pass
        for made in reversed(self.made):  # a namespace's end of a veth pair goes with it, and the pair
            kind, name = made.split(" ", 1)
            subprocess.run(["ip", kind, "del", name], capture_output=True)


STALE_NETNS = re.compile(r"^sd2h-(\d+)-\w+")
STALE_BRIDGE = re.compile(r"^\d+: sd(\d+)br[:@]")


def _alive(pid: str) -> bool:
    return Path(f"/proc/{pid}").exists()


def _stale_remove() -> None:
    """Take down the namespaces and bridges of earlier runs whose pytest died without its clean-up (SIGKILL):
    their processes first, so nothing of theirs is left holding the subnet or the ports."""
    for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines():
        match = STALE_NETNS.match(line)
        if match and not _alive(match.group(1)):
            name = line.split()[0]
            for pid in subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for line in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines():
        match = STALE_BRIDGE.match(line)
        if match and not _alive(match.group(1)):
            subprocess.run(["ip", "link", "del", f"sd{match.group(1)}br"], capture_output=True)


def _free_subnet(seed: int) -> ipaddress.IPv4Network:
    """A /24 of 10.231.0.0/16 that no interface here uses (two test runs at once pick two)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout if shutil.which("ip") else ""
    for step in range(256):
        octet = (seed + step) % 256
        if f" 10.231.{octet}." not in used:
            return ipaddress.IPv4Network(f"10.231.{octet}.0/24")
    raise NamespacesUnavailable("no free /24 in 10.231.0.0/16")


@pytest.fixture
def network() -> Iterator[Network]:
    net = Network()
    try:
        net.create()
    except NamespacesUnavailable as why:
        net.destroy()
        print(f"two-host test skipped: {why}")
        pytest.skip(f"network namespaces cannot be made here: {why}")
    try:
        yield net
    finally:
        net.destroy()


def _opened(servers: list[str]) -> tuple[tuple[str, str], list[str]]:
    """A new conversation, opened over REST on the first web server that answers; the servers from it on."""
    for index, base in enumerate(servers):
        if http("GET", base + "/api/widget/config")[0] == 200:
            return conversation_open(base), servers[index:] + servers[:index]
    raise AssertionError(f"no web server answers: {servers}")


def _turns(database_url: str, turn_ids: list[int]) -> dict[int, tuple[str, str, int, int, int]]:
    """turn id -> (status, answer text, done events, answer events, recoveries)."""
    events = TurnEvent._meta.db_table
    rows = sql(database_url, f"SELECT t.id, t.status, t.answer_text, "
                             f"(SELECT count(*) FROM {events} e WHERE e.turn_id = t.id AND e.type = 'done'), "
                             f"(SELECT count(*) FROM {events} e WHERE e.turn_id = t.id AND e.type = 'answer'), "
                             f"t.recoveries FROM {Turn._meta.db_table} t WHERE t.id = ANY(%s)", turn_ids)
    return {row[0]: row[1:] for row in rows}


def _log_tails(groups: list[ProcessGroup]) -> str:
    tails = []
    for group in groups:
        for log in sorted(group.log_dir.glob("*.log")):
            tails.append(f"--- {log.parent.name}/{log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:]))
    return "\n".join(tails)


@pytest.mark.django_db(transaction=True)
def test_a_host_killed_mid_burst_leaves_every_turn_done_exactly_once_on_the_other(network, django_db_blocker,
                                                                                    tmp_path: Path) -> None:
    content_seeded(django_db_blocker, exemplar_vectors=False)  # the copy leaves the exemplars out anyway
    llm = ScriptedLLM(host=network.gateway)
    llm.start()
    llm.plan_delay, llm.chunk_delay, llm.answer_text = 0.3, 0.15, ANSWER
    services_group = ProcessGroup(log_dir=tmp_path / "services")
    groups = {host.name: ProcessGroup(log_dir=tmp_path / f"host-{host.name}") for host in network.hosts}
    a, b = network.hosts
    try:
        # Without the guard's exemplars: embedding them costs 20-50 s of CPU and screening is not what
        # this test is about. PostgreSQL and Redis listen on the bridge only.
        services = services_start(services_group, tmp_path, source=settings.DATABASES["default"], supervised=False,
                                  without_data_of=(GuardExemplar._meta.db_table,), address=network.gateway,
                                  clients=(str(network.subnet),))
        assert "127.0.0.1" not in services.database_url + services.redis_url
        for host in network.hosts:
            env = stack_env(services, llm_url=llm.base_url, env={**RECOVERY, "ALLOWED_HOSTS": host.address})
            groups[host.name].start("worker", host.argv(stage_worker_argv(env, "two-hosts")), env=worker_env(env), cwd=ROOT)
            groups[host.name].start("web", host.argv(web_argv(host.address, WEB_PORT)), env=env, cwd=ROOT)
        app = Celery("two-hosts", broker=services.redis_url, set_as_current=False)
        try:
            until(lambda: all(http("GET", h.base + "/api/widget/config")[0] == 200 for h in network.hosts)
                  and len(app.control.ping(timeout=0.5) or []) == 2, 90, "both hosts' web servers and stage workers")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_log_tails([services_group, *groups.values()])}") from None
        assert {name.split("@")[1] for reply in app.control.ping(timeout=1) or [] for name in reply} == {a.hostname, b.hostname}

        def wave(numbers: range) -> tuple[list[Follower], Customers]:
            followers = []
            for number in numbers:
                own, other = (a, b) if number % 2 == 0 else (b, a)
                conversation, servers = _opened([own.base, other.base])
                followers.append(Follower(conversation, servers=servers,
                                          message=f"How do I reset my password? (customer {number})"))
            return followers, Customers([], followers, timeout=150)

        first, first_customers = wave(range(FIRST_WAVE))
        until(lambda: all(f.accepted for f in first), 60, "the first wave's messages to be accepted")
        # Mid-burst: host A's worker is streaming an answer (its lease names A's hostname).
        held_by_a = f"SELECT id FROM {Turn._meta.db_table} WHERE status = 'answering' AND split_part(lease_owner, ':', 2) = %s"
        until(lambda: any(f.streaming for f in first) and sql(services.database_url, held_by_a, a.hostname), 60,
              "host A's worker to stream an answer")
        a.kill()
        done_on_a = [f for f in first if f.done]  # answered before the kill: never needed B
        unfinished = sql(services.database_url, f"SELECT id, split_part(lease_owner, ':', 2) FROM {Turn._meta.db_table} "
                                                f"WHERE status = ANY(%s)", list(UNFINISHED))
        a_held = [turn_id for turn_id, holder in unfinished if holder == a.hostname]
        assert a_held, unfinished
        assert http("GET", a.base + "/api/widget/config")[0] == 0  # host A is gone
        second, second_customers = wave(range(FIRST_WAVE, CUSTOMERS))
        first_customers.wait(150)
        second_customers.wait(150)
        followers = first + second
        print(f"host A killed holding turns {a_held} ({len(unfinished)} under way, {len(done_on_a)} of A's answered "
              f"before); sockets per customer: {[f.sockets for f in followers]}")

        def report() -> str:
            return f"{[(f.turn, f.done, f.used) for f in followers if not f.done]}\n{_log_tails([*groups.values()])}"

        # Every customer: accepted once, one complete answer, resumed without a gap or a repeat.
        assert all(f.done for f in followers), report()
        for follower in followers:
            types = [frame["type"] for frame in follower.frames]
            assert types.count("done") == 1 and types.count("answer") == 1, (follower.turn, types)
            assert follower.shown() == ANSWER, (follower.turn, follower.shown())
            assert next(f for f in follower.frames if f["type"] == "answer")["payload"]["text"] == ANSWER
            assert follower.frames[-1]["payload"]["status"] == "done" and follower.repeated == 0
            seqs = [frame["seq"] for frame in follower.frames]
            assert seqs == sorted(set(seqs))
        # A's customers of the first wave were moved to B mid-answer; A's of the second went to B at once.
        for number, follower in enumerate(followers):
            if number % 2 == 1:
                assert set(follower.used) == {b.base}, follower.used
            elif number < FIRST_WAVE:
                assert follower.used[0] == a.base and (follower in done_on_a or follower.used[-1] == b.base), follower.used
            else:
                assert follower.used[-1] == b.base, follower.used
        assert len(done_on_a) < FIRST_WAVE // 2  # some of A's customers were mid-answer
        # In the database: every turn done once with the whole answer, every message saved once.
        turn_ids = [f.turn for f in followers if f.turn is not None]
        assert len(set(turn_ids)) == CUSTOMERS
        turns = _turns(services.database_url, turn_ids)
        assert {turn_id: row[:4] for turn_id, row in turns.items()} == {
            turn_id: ("done", ANSWER, 1, 1) for turn_id in turn_ids}
        ours = f"SELECT id FROM {Conversation._meta.db_table} WHERE public_id::text = ANY(%s)"
        conversations = [f.conversation[0] for f in followers]
        messages = sql(services.database_url, f"SELECT text, count(*) FROM {Message._meta.db_table} "
                                              f"WHERE role = 'user' AND conversation_id IN ({ours}) GROUP BY text",
                       conversations)
        assert sorted(messages) == sorted((f.message, 1) for f in followers)
        assert sql(services.database_url, f"SELECT count(*) FROM {Turn._meta.db_table} WHERE conversation_id IN ({ours})",
                   conversations) == [(CUSTOMERS,)]
        # The turns A's worker held when it died were sent again and finished by B's worker (the only one left).
        assert all(turns[turn_id][4] >= 1 for turn_id in a_held), {t: turns[t] for t in a_held}
        assert a.pids() == [] and all(child.proc.poll() is None for child in groups["b"].children)
    finally:
        for group in groups.values():
            group.stop_all(timeout=5)
        services_group.stop_all()
        llm.stop()


@pytest.mark.parametrize(("euid", "missing", "reason"), [
    (1000, None, "making network namespaces needs root"),
    (0, "unshare", "the `unshare` command is missing"),
])
def test_where_namespaces_cannot_be_made_the_reason_is_given(monkeypatch, euid, missing, reason) -> None:
    """The two-host test is skipped only with a reason (``-ra`` prints it), never silently."""
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == missing else real_which(tool))
    net = Network()
    with pytest.raises(NamespacesUnavailable, match=reason):
        net.create()
    assert net.made == []  # nothing made, nothing to take down


def test_the_namespaces_of_a_run_killed_before_its_clean_up_are_taken_down_by_the_next(network) -> None:
    dead = 5_000_000  # above the largest pid a kernel allows (2**22): no process has it
    assert not _alive(str(dead))
    _ip("netns", "add", f"sd2h-{dead}-a")
    _ip("link", "add", f"sd{dead}br", "type", "bridge")
    try:
        _stale_remove()
        assert f"sd2h-{dead}-a" not in _ip("netns", "list")
        assert f"sd{dead}br" not in _ip("-o", "link")
        assert network.hosts[0].netns in _ip("netns", "list")  # a live run's own are left alone
    finally:
        subprocess.run(["ip", "netns", "del", f"sd2h-{dead}-a"], capture_output=True)
        subprocess.run(["ip", "link", "del", f"sd{dead}br"], capture_output=True)
