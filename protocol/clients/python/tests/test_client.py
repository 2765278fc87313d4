"""Socket-only behaviour against a real `refine-supervisor serve`: refusals as exceptions on a
connection that stays usable, env and labels on the wire, and the events op."""

import pytest

from conftest import HAS_EVENTS, NO_EVENTS, Client
from refine_supervisor_client import AsyncClient, NotFound, RefineError


def test_refusals_are_exceptions(service):
    with Client.connect(home=str(service)) as c:
        with pytest.raises(NotFound):
            c.show("nobody")
        with pytest.raises(NotFound):
            c.adopt("nobody")
        job = c.launch(["sleep", "600"], keep=True)
        with pytest.raises(RefineError) as bad:
            job.signal("NOPE")
        assert bad.value.kind == "bad_request"
        # The connection is still good after a refusal.
        assert job.id in [s.id for s in c.list()]
        job.stop()


def test_env_and_a_unique_label(service):
    with Client.connect(home=str(service)) as c:
        job = c.launch([b"sh", b"-c", b'test "$GREETING" = hi'], env={"GREETING": "hi"},
                       label="only", unique=True, keep=True)
        assert job.wait(timeout=60).exit_code == 0
        held = c.launch(["sleep", "600"], label="only", unique=True, keep=True)
        with pytest.raises(RefineError) as refused:
            c.launch(["true"], label="only", unique=True, keep=True)
        assert refused.value.kind == "label_held"
        held.stop()


def test_events_list_then_follow(service):
    if not HAS_EVENTS:
        pytest.skip(NO_EVENTS)
    with Client.connect(home=str(service)) as c:
        job = c.launch(["true"], label="ev", keep=True)
        job.wait(timeout=60)
        seen = list(c.events())
        mine = [e for e in seen if e["id"] == job.id]
        assert mine and all(e["label"] == "ev" for e in mine), seen
        assert all({"cursor", "kind", "id", "time_unix_ms"} <= e.keys() for e in seen)
        cursor = c.events_end["cursor"]
        assert list(c.events(since=cursor)) == []
        # follow: a new launch on another connection shows up on this one.
        stream = c.events(since=cursor, follow=True)
        with Client.connect(home=str(service)) as other:
            later = other.launch(["true"], keep=True)
            for event in stream:
                if event["id"] == later.id:
                    break
            other.wait(later.id, timeout=60)

    async def main():
        async with await AsyncClient.connect(home=str(service)) as a:
            kinds = [e["kind"] async for e in a.events()]
            assert kinds and a.events_end["cursor"]

    import asyncio

    asyncio.run(main())


def test_the_reply_version_is_2_and_a_version_1_reply_is_refused():
    """API 2: `reason` is an object tagged by `kind`. A version-1 service sends strings there,
    so its replies are refused in one line naming both versions, not half-read."""
    from refine_supervisor_client import API_VERSION
    from refine_supervisor_client._socket import decode, encode

    assert API_VERSION == 2
    assert encode("list", {}).startswith(b'{"v":2,')
    assert decode(b'{"v":2,"ok":true,"result":{"list":[]}}\n') == {"list": []}
    with pytest.raises(RefineError) as old:
        decode(b'{"v":1,"ok":true,"result":{"list":[]}}\n')
    assert old.value.kind == "bad_reply"
    assert "1" in old.value.message and "2" in old.value.message
