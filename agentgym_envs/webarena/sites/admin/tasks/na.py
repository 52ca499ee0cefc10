"""The shop admin's task templates of unachievable tasks."""

from __future__ import annotations

from agentgym_envs.webarena.sites.admin.tasks.common import TASKS, customers, open_customer, open_order, orders
from agentgym_envs.webarena.tasks.templates import TaskTemplate, not_achievable, stop

TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "customer_phone",
        "na",
        "What is the phone number of {{customer}}?",
        customers,
        lambda seed, v: TASKS.built([*open_customer(v["customer"]), stop("N/A")], not_achievable()),
    ),
    TASKS.template(
        "refund_order",
        "na",
        "Refund order #{{number}} to the customer's credit card.",
        lambda seed: orders(seed, "status = 'Complete'"),
        lambda seed, v: TASKS.built([*open_order(v["number"]), stop("N/A")], not_achievable()),
    ),
]
