"""The tools the level-1 view tests give their chats: a gated refund that counts its runs,
and an ungated weather lookup."""

from __future__ import annotations

from nbagent import Tool, tool

REFUNDS: list[int] = []  # every order refunded, in order (clear it first)


class IssueRefund(Tool):
    """Issues a refund for an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        REFUNDS.append(order_id)
        return f"refunded order {order_id}"


@tool
def get_weather(city: str) -> str:
    """Get current weather for a city.

    Args:
        city: City name.
    """
    return f"sunny in {city}"
