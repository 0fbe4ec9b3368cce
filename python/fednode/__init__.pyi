# Type stubs for editors and type checkers (docs/python.md). The package is python/fednode/*.py over
# the extension module _fednode (python/*.cpp).
import os
from typing import Any, Callable, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

ArrayLike = Union[npt.ArrayLike, Any]  # NumPy arrays, or torch tensors read through NumPy
Data = Tuple[ArrayLike, ArrayLike]      # (X [n, d] numbers, y [n] integer labels)
PathLike = Union[str, os.PathLike[str]]

class Error(Exception):
    exit_status: int

class InputError(Error, ValueError): ...
class UsageError(Error, ValueError): ...
class NetworkError(InputError): ...
class SecurityError(InputError): ...

def simulate(
    train: Optional[Data] = ...,
    test: Optional[Data] = ...,
    *,
    class_names: Optional[Sequence[str]] = ...,
    progress: Optional[Callable[[str], None]] = ...,
    method: str = ...,
    topology: Literal["linear", "ring", "star", "graph"] = ...,
    nodes: int = ...,
    partition: Literal["iid", "dirichlet", "shards", "labels", "dominant"] = ...,
    dirichlet_alpha: float = ...,
    seed: int = ...,
    seeds: Union[Sequence[int], range, str] = ...,
    baselines: bool = ...,
    quiet: bool = ...,
    report: PathLike = ...,
    save_heads: PathLike = ...,
    **options: Any,
) -> dict[str, Any]: ...

class Classifier:
    @staticmethod
    def from_file(path: str, backbone: str = ..., input_size: int = ...) -> Classifier: ...
    @staticmethod
    def from_state_dir(dir: str, personal: bool = ..., backbone: str = ..., input_size: int = ...) -> Classifier: ...
    def predict(self, data: Union[ArrayLike, Sequence[PathLike]]) -> npt.NDArray[np.int32]: ...
    def predict_proba(self, data: Union[ArrayLike, Sequence[PathLike]]) -> npt.NDArray[np.float32]: ...
    def logits(self, data: Union[ArrayLike, Sequence[PathLike]]) -> npt.NDArray[np.float32]: ...
    def export(self, out: str, head_only: bool = ...) -> None: ...
    def save(self, path: str) -> None: ...
    @property
    def kind(self) -> str: ...
    @property
    def num_classes(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def reads_images(self) -> bool: ...
    @property
    def class_names(self) -> list[str]: ...
    @property
    def method(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def run(self) -> str: ...
    @property
    def personal(self) -> bool: ...
    @property
    def recipe(self) -> str: ...
    @property
    def contributors(self) -> list[int]: ...

class Node:
    def __init__(
        self,
        topology: PathLike,
        id: Union[str, int],
        *,
        features: Optional[Data] = ...,
        test: Optional[Data] = ...,
        backbone_fingerprint: Optional[str] = ...,
        class_names: Optional[Sequence[str]] = ...,
        num_classes: Optional[int] = ...,
        key_dir: Optional[PathLike] = ...,
        state_dir: Optional[PathLike] = ...,
        metrics: Optional[PathLike] = ...,
        discover: bool = ...,
        discover_on: Optional[Sequence[str]] = ...,
        quiet: bool = ...,
        on_head: Optional[Callable[[Classifier], None]] = ...,
        on_log: Optional[Callable[[str, str], None]] = ...,
        on_knowledge: Optional[Callable[[int, list[int]], None]] = ...,
    ) -> None: ...
    def step(self, seconds: float = ...) -> bool: ...
    def run(self) -> dict[str, Any]: ...
    @property
    def result(self) -> dict[str, Any]: ...
    def classifier(self, personal: bool = ...) -> Optional[Classifier]: ...
    def request_stop(self) -> None: ...
    @property
    def state_dir(self) -> str: ...

def load_topology(path: PathLike) -> dict[str, Any]: ...
def keygen(dir: PathLike) -> str: ...
def extract(
    dataset: Optional[Literal["fashion-mnist"]] = ...,
    *,
    images: Optional[PathLike] = ...,
    split: Literal["train", "test"] = ...,
    limit: Optional[int] = ...,
    backbone: PathLike = ...,
    input_size: int = ...,
    threads: int = ...,
    batch_size: int = ...,
    cache: bool = ...,
    progress: bool = ...,
    skip_bad: bool = ...,
    dataset_dir: Optional[PathLike] = ...,
    cache_dir: Optional[PathLike] = ...,
    optimize: bool = ...,
) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.int32], dict[str, Any]]: ...
