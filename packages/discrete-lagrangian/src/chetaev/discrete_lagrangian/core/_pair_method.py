"""``PairMethod``: what a method defined by a partitioned Runge–Kutta pair declares.

VPRK (paper Thm. 4.2), ConstrainedPRK (paper eq. (13)) and LieVPRK (paper Thm. 6.1) are each
built on a symplectic pair ``(a, b; â, b̂)`` held in ``self.pair`` / ``self.coeffs``; their
``name``, ``order`` and ``symmetric`` are read from the pair in one way, written here once.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._method import Method
from ._prk import pair_symmetric

__all__ = ["PairMethod", "pair_order"]


def pair_order(pair: Any) -> int:
    """Order of the partitioned pair (a Tableau is paired with its symplectic conjugate),
    from the bi-coloured tree conditions of ``chetaev.rktableaux``."""
    from chetaev.rktableaux import PartitionedTableau, symplectic_pair

    p = pair if isinstance(pair, PartitionedTableau) else symplectic_pair(pair)
    return int(p.order())


class PairMethod(Method):
    """A :class:`Method` defined by a partitioned RK pair.

    Subclasses (frozen attrs classes) hold ``pair``, ``coeffs`` (a ``PRKCoefficients``) and a
    ``_cache`` dict, and set the class attribute ``family`` (the display name's prefix);
    :attr:`name` appends :meth:`_name_details` in brackets.

    Attributes
    ----------
    family : str
        The method family ("VPRK", "LieVPRK", ...).
    """

    __slots__ = ()
    family: ClassVar[str] = "PRK"

    def _name_details(self) -> str:
        """What follows the family in :attr:`name`: the pair's name (subclasses may add)."""
        return self.coeffs.name

    @property
    def name(self) -> str:
        """Method name: ``family[details]``."""
        return f"{self.family}[{self._name_details()}]"

    @property
    def order(self) -> int | None:
        """Classical order of the pair (from the order conditions; computed once)."""
        if "order" not in self._cache:
            self._cache["order"] = pair_order(self.pair)
        return self._cache["order"]

    @property
    def symmetric(self) -> bool:
        """Whether both tableaux of the pair are symmetric (Gauss, Lobatto IIIA–IIIB)."""
        return pair_symmetric(self.coeffs)
