"""Game-length limits of the random generators: refuse what no game can reach, never retry forever.

A random game shorter than --min-fullmoves is replaced by the next seed. Two things
made that loop spin for ever: a --max-plies (or the Numba engine's ply buffer) below
2 x --min-fullmoves, and a --min-fullmoves that random play reaches too rarely. The
first is refused before any game is played (exit 2); the second stops after
GIVE_UP consecutive short games (exit 1) with the figures needed to change the flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from methodkit.core.errors import RunFailure, UsageError

# The longest legal game when the fifty-move draw is claimed: 5898.5 full moves.
LONGEST_CLAIMED_GAME_PLIES = 11797
# The Numba engine's ply buffer when --max-plies is not given.
NUMBA_PLY_BUFFER = 4096
# Consecutive short games after which --min-fullmoves is taken as unreachable.
GIVE_UP = 1000

T = TypeVar("T")


def check_length_flags(min_fullmoves: int, max_plies: int | None, engine_cap: int | None = None) -> None:
    """UsageError naming the flags when no game could have --min-fullmoves full moves."""
    if max_plies is not None and max_plies < 2 * min_fullmoves:
        raise UsageError(
            f"--max-plies {max_plies} is below 2 x --min-fullmoves {min_fullmoves}: no game could be kept; "
            f"raise --max-plies to at least {2 * min_fullmoves} or lower --min-fullmoves"
        )
    limit = LONGEST_CLAIMED_GAME_PLIES if engine_cap is None else min(engine_cap, LONGEST_CLAIMED_GAME_PLIES)
    if 2 * min_fullmoves > limit:
        raise UsageError(
            f"--min-fullmoves {min_fullmoves} is unreachable: games here end within {limit} plies "
            f"({limit // 2} full moves); lower --min-fullmoves"
        )


def engine_cap(engine: str, max_plies: int | None) -> int | None:
    """The most plies a game of `engine` can have (None: only the rules bound it)."""
    if max_plies is not None:
        return max_plies
    return NUMBA_PLY_BUFFER if engine == "numba" else None


def keep_long_games(
    play: Callable[[int], tuple[int, T]], n_games: int, min_fullmoves: int, give_up: int = GIVE_UP
) -> Iterator[tuple[int, T]]:
    """(index, game) of the first `n_games` seeds whose game has >= `min_fullmoves` full moves.

    `play(index)` returns (plies, game). RunFailure after `give_up` short games in a row."""
    kept = index = short_in_a_row = 0
    while kept < n_games:
        plies, game = play(index)
        index += 1
        if plies // 2 < min_fullmoves:
            short_in_a_row += 1
            if short_in_a_row >= give_up:
                raise RunFailure(
                    f"--min-fullmoves {min_fullmoves}: the last {give_up} random games were all shorter "
                    f"(kept {kept} of {n_games} after {index} games); lower --min-fullmoves"
                )
            continue
        short_in_a_row = 0
        kept += 1
        yield index - 1, game


# Bytes per ply held in memory: 75 label bytes + a 4-byte token, twice while a shard is packed.
BYTES_PER_PLY = 2 * (75 + 4)
# Random games seldom run past this many plies; the estimate for a run without --max-plies.
TYPICAL_RANDOM_PLIES = 1000


def guard_random_memory(games: int, games_per_shard: int, max_plies: int | None, all_in_memory: bool) -> None:
    """Refuse (exit 2) a run whose shard (or whole data set, for --pgn on Numba) cannot fit in memory."""
    from methodkit.core.memory import guard_memory

    held = games if all_in_memory else min(games, games_per_shard)
    plies = (max_plies if max_plies is not None else TYPICAL_RANDOM_PLIES) + 1
    flag = "--games" if all_in_memory or held == games else "--games-per-shard"
    guard_memory(held * plies * BYTES_PER_PLY, f"{held:,} games of up to {plies - 1} plies", flag)
