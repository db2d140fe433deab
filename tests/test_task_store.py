"""`MemoryTaskStore` against the `TaskStore` contract (tests/task_store_contract.py)."""

from __future__ import annotations

import pytest

from mcpcore.taskstore import MemoryTaskStore
from task_store_contract import TaskStoreContract


class TestMemoryTaskStore(TaskStoreContract):
    @pytest.fixture
    def task_store(self) -> MemoryTaskStore:
        return MemoryTaskStore()
