"""What the Ray backend relies on, checked on the shared local Ray instance.

A chat factory pickled on the driver builds its chat on a worker, the worker
reaches the loopback fake server, and it runs the nbagent under test.
"""

from __future__ import annotations

from typing import Any

from _ray_agents import FakeServerChat

import nbagent
from nbagent.testing import FakeLLMServer


def test_the_workers_run_the_code_under_test(ray_cluster: Any) -> None:
    import ray

    @ray.remote
    def where() -> str:
        import nbagent as worker_nbagent

        return str(worker_nbagent.__file__)

    assert ray.get(where.remote()) == nbagent.__file__
    assert ray.cluster_resources()["CPU"] == 2


def test_a_pickled_factory_builds_a_chat_on_a_worker(
    ray_cluster: Any, server: FakeLLMServer
) -> None:
    import os

    import ray

    @ray.remote
    def run(factory: Any, prompt: str) -> tuple[int, str, list[str]]:
        chat = factory()
        answer = chat.ask(prompt)
        return os.getpid(), answer.content, [c.status for c in chat.tool_calls]

    pid, text, statuses = ray.get(run.remote(FakeServerChat(server.openai_base_url), "hello"))
    assert pid != os.getpid()
    assert text == "hello: 10"
    assert statuses == ["ok"]
    assert len(server.requests) == 2
