"""ComplexFuncBench-style Booking tasks: multi-step calls whose arguments come from earlier responses.

Offline stand-in for ComplexFuncBench (nestful-wrapper is not installed here): the tools follow its
Booking.com API names (Search_Hotel_Destination, Search_Hotels, Get_Room_List, Search_Flight_Location,
Search_Flights, Get_Flight_Details, Search_Car_Location, Search_Car_Rentals, Search_Attraction_Location,
Search_Attractions). The generator draws each response from a seeded fake backend, so a later call
carries ids (dest_id, hotel_id, fromId, token, coordinates) read from earlier responses, as in the
benchmark. Only the recorded (call, response) pairs are kept: the replay environment is the
benchmark's response cache.
"""

from __future__ import annotations

import numpy as np

CITIES = ("Paris", "Berlin", "Tokyo", "Lisbon", "Toronto", "Sydney", "Cairo", "Oslo", "Lima", "Seoul", "Rome", "Dubai")
_S, _I, _N = {"type": "string"}, {"type": "integer"}, {"type": "number"}


def _tool(name, description, params, required=None, response=()):
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": params, "required": list(required or params)},
        "response": {"type": "object", "properties": {k: {} for k in response}},
        "class": "Booking",
    }


TOOLS = [
    _tool(
        "Search_Hotel_Destination",
        "Search a destination by name to get its dest_id and search_type.",
        {"query": _S},
        response=["dest_id", "search_type"],
    ),
    _tool(
        "Search_Hotels",
        "Search hotels at a destination for the given dates.",
        {"dest_id": _S, "search_type": _S, "arrival_date": _S, "departure_date": _S, "adults": _I},
        required=["dest_id", "search_type", "arrival_date", "departure_date"],
        response=["hotel_id", "name"],
    ),
    _tool(
        "Get_Room_List",
        "List the rooms of a hotel for the given dates.",
        {"hotel_id": _I, "arrival_date": _S, "departure_date": _S},
        response=["room_id", "price"],
    ),
    _tool(
        "Search_Flight_Location",
        "Search an airport or city by name to get its flight location id.",
        {"query": _S},
        response=["id", "name"],
    ),
    _tool(
        "Search_Flights",
        "Search one-way flights between two location ids on a date.",
        {"fromId": _S, "toId": _S, "departDate": _S},
        response=["token", "price"],
    ),
    _tool(
        "Get_Flight_Details",
        "Get the details of a flight offer by its token.",
        {"token": _S},
        response=["segments", "price"],
    ),
    _tool(
        "Search_Car_Location",
        "Search a place by name to get its coordinates for car rentals.",
        {"query": _S},
        response=["latitude", "longitude"],
    ),
    _tool(
        "Search_Car_Rentals",
        "Search car rentals at coordinates for pick-up and drop-off dates.",
        {"pick_up_latitude": _N, "pick_up_longitude": _N, "pick_up_date": _S, "drop_off_date": _S},
        response=["vehicle_id", "price"],
    ),
    _tool(
        "Search_Attraction_Location",
        "Search attractions by place name to get a product or destination id.",
        {"query": _S},
        response=["id"],
    ),
    _tool(
        "Search_Attractions",
        "List attractions of a destination id, sorted by trending or price.",
        {"id": _S, "sortBy": _S},
        response=["slug", "name"],
    ),
]


class _Backend:
    """Seeded fake Booking responses (only used to record the cache)."""

    def __init__(self, rng):
        self.rng = rng

    def _id(self, lo=10**5, hi=10**7) -> int:
        return int(self.rng.integers(lo, hi))

    def __call__(self, name: str, a: dict):
        r = self.rng
        if name == "Search_Hotel_Destination":
            return [
                {"dest_id": f"-{self._id()}", "search_type": "CITY", "name": a["query"]},
                {"dest_id": str(self._id()), "search_type": "DISTRICT", "name": f"{a['query']} Centre"},
            ]
        if name == "Search_Hotels":
            return {
                "hotels": [
                    {"hotel_id": self._id(), "name": f"Hotel {w}", "price": round(float(r.uniform(60, 400)), 2)}
                    for w in ("Aurora", "Meridian", "Harbour")[: int(r.integers(2, 4))]
                ]
            }
        if name == "Get_Room_List":
            return {"rooms": [{"room_id": self._id(), "price": round(float(r.uniform(60, 400)), 2)} for _ in range(2)]}
        if name == "Search_Flight_Location":
            code = a["query"][:3].upper()
            return [
                {"id": f"{code}.AIRPORT", "name": f"{a['query']} International"},
                {"id": f"{code}.CITY", "name": a["query"]},
            ]
        if name == "Search_Flights":
            return {
                "flightOffers": [
                    {"token": f"d6a1f_{self._id()}", "price": round(float(r.uniform(80, 900)), 2)}
                    for _ in range(int(r.integers(2, 4)))
                ]
            }
        if name == "Get_Flight_Details":
            return {"segments": [{"departureAirport": "A", "arrivalAirport": "B"}], "token": a["token"]}
        if name == "Search_Car_Location":
            return [
                {
                    "name": a["query"],
                    "latitude": round(float(r.uniform(-60, 60)), 4),
                    "longitude": round(float(r.uniform(-150, 150)), 4),
                }
            ]
        if name == "Search_Car_Rentals":
            return {
                "vehicles": [{"vehicle_id": self._id(), "price": round(float(r.uniform(20, 120)), 2)} for _ in range(2)]
            }
        if name == "Search_Attraction_Location":
            return {
                "products": [{"id": f"PR{self._id()}", "title": f"{a['query']} tour"}],
                "destinations": [{"id": f"eyJ{self._id()}", "name": a["query"]}],
            }
        if name == "Search_Attractions":
            return {"products": [{"slug": f"pr{self._id()}", "name": f"Attraction {i}"} for i in range(2)]}
        raise ValueError(name)


def _date(rng, base: int = 0) -> str:
    day = int(rng.integers(1, 26)) if not base else base
    return f"2026-{int(rng.integers(5, 10)):02d}-{day:02d}"


def _chain(kind: str, rng, backend, city: str, other: str):
    """(user text, [(call, response)]) of one request; later arguments read from earlier responses."""
    steps = []

    def call(name, **arguments):
        response = backend(name, arguments)
        steps.append(({"name": name, "arguments": arguments}, response))
        return response

    arrive = _date(rng)
    y, m, d = arrive.split("-")
    leave = f"{y}-{m}-{int(d) + int(rng.integers(1, 4)):02d}"
    if kind == "hotel":
        dest = call("Search_Hotel_Destination", query=city)[0]
        hotels = call(
            "Search_Hotels",
            dest_id=dest["dest_id"],
            search_type=dest["search_type"],
            arrival_date=arrive,
            departure_date=leave,
        )["hotels"]
        best = min(hotels, key=lambda h: h["price"])
        call("Get_Room_List", hotel_id=best["hotel_id"], arrival_date=arrive, departure_date=leave)
        return f"Find the cheapest hotel in {city} from {arrive} to {leave} and show me its rooms.", steps
    if kind == "flight":
        src = call("Search_Flight_Location", query=other)[0]["id"]
        dst = call("Search_Flight_Location", query=city)[0]["id"]
        offers = call("Search_Flights", fromId=src, toId=dst, departDate=arrive)["flightOffers"]
        call("Get_Flight_Details", token=min(offers, key=lambda o: o["price"])["token"])
        return f"I fly from {other} to {city} on {arrive}: details of the cheapest flight, please.", steps
    if kind == "car":
        place = call("Search_Car_Location", query=f"{city} airport")[0]
        call(
            "Search_Car_Rentals",
            pick_up_latitude=place["latitude"],
            pick_up_longitude=place["longitude"],
            pick_up_date=arrive,
            drop_off_date=leave,
        )
        return f"Which rental cars are there at {city} airport from {arrive} to {leave}?", steps
    dest = call("Search_Attraction_Location", query=city)["destinations"][0]["id"]
    sort = ("trending", "lowest_price")[int(rng.integers(2))]
    call("Search_Attractions", id=dest, sortBy=sort)
    return f"Show me the attractions of {city}, sorted by {sort.replace('_', ' ')}.", steps


KINDS = ("hotel", "flight", "car", "attraction")


def generate(n_tasks: int, seed: int) -> list[dict]:
    """[{task_id, turns: [user text], recorded: [[(call, response)]]}] of n_tasks seeded Booking tasks."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xCFB]))
    out = []
    for t in range(n_tasks):
        backend = _Backend(rng)
        city, other = (CITIES[i] for i in rng.choice(len(CITIES), 2, replace=False))
        kinds = rng.choice(len(KINDS), int(rng.integers(1, 3)), replace=False)
        turns, recorded = [], []
        for k in kinds:
            text, steps = _chain(KINDS[k], rng, backend, city, other)
            turns.append(text)
            recorded.append(steps)
        out.append({"task_id": f"cfb-booking:{seed}:{t:04d}", "turns": turns, "recorded": recorded})
    return out
