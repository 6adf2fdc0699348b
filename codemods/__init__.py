"""libcst codemods for warpfix findings: one module per rewrite (see ``README.md``).

``COMMANDS`` maps a rule ID to the command class that fixes it.
"""

from __future__ import annotations

from codemods._base import FindingCommand, NotApplicable
from codemods.wf101_copy_rebind import CopyToRebind
from codemods.wf102_copy_kernel import CopyKernel
from codemods.wf103_rotate import RotateBuffers
from codemods.wf104_fresh_output import FreshOutput
from codemods.wf105_fresh_fill import FreshFill
from codemods.wf108_clone_view import CloneView
from codemods.wf201_requires_grad import RequireGrad
from codemods.wf202_enable_backward import EnableBackward
from codemods.wf301_tape_zero import ZeroTape
from codemods.wf302_after_backward import MoveAcrossBackward
from codemods.wf401_kernel_output import KernelOutput
from codemods.wf402_component_accumulate import ComponentAccumulate
from codemods.wf403_static_bound import StaticLoopBound
from codemods.wf501_retain_grad import DropRetainGrad
from codemods.wf502_duplicate_launch import DeleteDuplicateLaunch
from codemods.wf601_frame_tape import WF601Fixes
from codemods.wf701_where import SafeSelect
from codemods.wf702_length import UseLength
from codemods.wf703_straight_through import StraightThrough
from codemods.wf801_adjoint_accumulate import AdjointAccumulate
from codemods.wf803_reversible_increment import ReversibleIncrement

__all__ = ["COMMANDS", "FindingCommand", "NotApplicable"]

_ALL: tuple[type[FindingCommand], ...] = (
    CopyToRebind,
    CopyKernel,
    RotateBuffers,
    FreshOutput,
    FreshFill,
    CloneView,
    RequireGrad,
    EnableBackward,
    ZeroTape,
    MoveAcrossBackward,
    KernelOutput,
    ComponentAccumulate,
    StaticLoopBound,
    DropRetainGrad,
    DeleteDuplicateLaunch,
    WF601Fixes,
    SafeSelect,
    UseLength,
    StraightThrough,
    AdjointAccumulate,
    ReversibleIncrement,
)

COMMANDS: dict[str, type[FindingCommand]] = {rule: cmd for cmd in _ALL for rule in cmd.RULES}
