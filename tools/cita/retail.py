"""A τ²-bench-retail-style domain: a JSON database, its tools as pure state functions, and a task generator.

Offline stand-in for the tau2 retail package (not installed here): the tools follow τ²-bench retail's
names, arguments and rules (an order is cancelled or modified only while `pending`, returned or
exchanged only once `delivered`; an exchange keeps the product and must be to an available variant;
payment methods must belong to the order's user), and each raises ValueError on a rule violation, as
tau2's tools do. The generator draws a catalogue, users with orders, and tasks of 1-3 user turns, each
turn one request (cancel, change an order's address, pay with another method, return, exchange, change
the user's address) whose gold calls look up what they need first. The user turns are fixed texts
(replayed, no user simulator); each task carries its own initial database, so replay needs no other
file.
"""

from __future__ import annotations

import copy

import numpy as np

PRODUCTS = ("t-shirt", "water bottle", "desk lamp", "backpack", "headphones", "sneakers", "coffee maker", "yoga mat")
OPTIONS = {"color": ("black", "white", "red", "blue", "green"), "size": ("S", "M", "L", "XL")}
FIRST = ("Yusuf", "Mia", "Noah", "Aarav", "Lena", "Omar", "Sofia", "Ivan", "Chen", "Amara", "Lucas", "Priya")
LAST = ("Rossi", "Garcia", "Kim", "Ito", "Silva", "Novak", "Moreau", "Patel", "Berg", "Hughes")
CITIES = (("Austin", "TX", "78701"), ("Denver", "CO", "80202"), ("Seattle", "WA", "98101"), ("Boston", "MA", "02108"))
STREETS = ("Elm Street", "Oak Avenue", "Pine Road", "Maple Lane", "Cedar Court")
REASONS = ("no longer needed", "ordered by mistake")

_S, _A, _L = {"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "object"}
_ADDR = {k: _S for k in ("address1", "address2", "city", "state", "country", "zip")}


def _tool(name, description, params, required=None, response=None):
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": params, "required": list(required or params)},
        "response": {"type": "object", "properties": {k: {} for k in (response or [])}},
        "class": "RetailTools",
    }


TOOLS = [
    _tool("find_user_id_by_email", "Find a user id by email.", {"email": _S}, response=["user_id"]),
    _tool(
        "find_user_id_by_name_zip",
        "Find a user id by first name, last name and zip code.",
        {"first_name": _S, "last_name": _S, "zip": _S},
        response=["user_id"],
    ),
    _tool(
        "get_user_details",
        "Get the details of a user, including their orders and payment methods.",
        {"user_id": _S},
        response=["user_id", "name", "email", "address", "payment_methods", "orders"],
    ),
    _tool(
        "get_order_details",
        "Get the status and items of an order.",
        {"order_id": _S},
        response=["order_id", "user_id", "status", "items", "address", "payment_history"],
    ),
    _tool(
        "get_product_details",
        "Get the inventory details of a product and its variants.",
        {"product_id": _S},
        response=["product_id", "name", "variants"],
    ),
    _tool("list_all_product_types", "List the name and product id of every product type.", {}, response=["products"]),
    _tool(
        "cancel_pending_order",
        "Cancel a pending order; reason is 'no longer needed' or 'ordered by mistake'.",
        {"order_id": _S, "reason": _S},
    ),
    _tool("modify_pending_order_address", "Modify the shipping address of a pending order.", {"order_id": _S, **_ADDR}),
    _tool(
        "modify_pending_order_payment",
        "Pay a pending order with another payment method of the user.",
        {"order_id": _S, "payment_method_id": _S},
    ),
    _tool(
        "return_delivered_order_items",
        "Return some items of a delivered order, refunded to a payment method.",
        {"order_id": _S, "item_ids": _A, "payment_method_id": _S},
    ),
    _tool(
        "exchange_delivered_order_items",
        "Exchange items of a delivered order for other variants of the same products.",
        {"order_id": _S, "item_ids": _A, "new_item_ids": _A, "payment_method_id": _S},
    ),
    _tool("modify_user_address", "Modify the default address of a user.", {"user_id": _S, **_ADDR}),
]
TOOL_NAMES = tuple(t["name"] for t in TOOLS)


# ---------------------------------------------------------------- the tools (pure functions of the DB)


def _user(db, user_id):
    if user_id not in db["users"]:
        raise ValueError("User not found")
    return db["users"][user_id]


def _order(db, order_id):
    if order_id not in db["orders"]:
        raise ValueError("Order not found")
    return db["orders"][order_id]


def _pending(db, order_id):
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ValueError("Non-pending order cannot be modified")
    return order


def _delivered(db, order_id):
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ValueError("Non-delivered order cannot be returned or exchanged")
    return order


def _payment(db, order, payment_method_id):
    if payment_method_id not in db["users"][order["user_id"]]["payment_methods"]:
        raise ValueError("Payment method not found")


def _items(order, item_ids):
    have = [it["item_id"] for it in order["items"]]
    if not item_ids or any(item_ids.count(i) > have.count(i) for i in item_ids):
        raise ValueError("Some item not found in the order")


def _address(**kw):
    return {k: kw[k] for k in ("address1", "address2", "city", "state", "country", "zip")}


def execute(db: dict, name: str, arguments: dict):
    """Run tool `name` on db (mutated in place); returns the result or raises ValueError/TypeError."""
    a = dict(arguments)
    if name == "find_user_id_by_email":
        for uid, user in sorted(db["users"].items()):
            if user["email"] == a["email"]:
                return uid
        raise ValueError("User not found")
    if name == "find_user_id_by_name_zip":
        key = (a["first_name"].lower(), a["last_name"].lower(), a["zip"])
        for uid, user in sorted(db["users"].items()):
            if (user["name"]["first_name"].lower(), user["name"]["last_name"].lower(), user["address"]["zip"]) == key:
                return uid
        raise ValueError("User not found")
    if name == "get_user_details":
        return copy.deepcopy(_user(db, a["user_id"]))
    if name == "get_order_details":
        return copy.deepcopy(_order(db, a["order_id"]))
    if name == "get_product_details":
        if a["product_id"] not in db["products"]:
            raise ValueError("Product not found")
        return copy.deepcopy(db["products"][a["product_id"]])
    if name == "list_all_product_types":
        return {p["name"]: pid for pid, p in sorted(db["products"].items())}
    if name == "cancel_pending_order":
        order = _pending(db, a["order_id"])
        if a["reason"] not in REASONS:
            raise ValueError("Invalid reason")
        order["status"] = "cancelled"
        order["cancel_reason"] = a["reason"]
        return copy.deepcopy(order)
    if name == "modify_pending_order_address":
        order = _pending(db, a.pop("order_id"))
        order["address"] = _address(**a)
        return copy.deepcopy(order)
    if name == "modify_pending_order_payment":
        order = _pending(db, a["order_id"])
        _payment(db, order, a["payment_method_id"])
        if order["payment_history"][-1]["payment_method_id"] == a["payment_method_id"]:
            raise ValueError("The new payment method should be different from the current one")
        order["payment_history"].append({"transaction_type": "payment", "payment_method_id": a["payment_method_id"]})
        return copy.deepcopy(order)
    if name == "return_delivered_order_items":
        order = _delivered(db, a["order_id"])
        _payment(db, order, a["payment_method_id"])
        _items(order, list(a["item_ids"]))
        order["status"] = "return requested"
        order["return_items"] = sorted(a["item_ids"])
        order["return_payment_method_id"] = a["payment_method_id"]
        return copy.deepcopy(order)
    if name == "exchange_delivered_order_items":
        order = _delivered(db, a["order_id"])
        _payment(db, order, a["payment_method_id"])
        old, new = list(a["item_ids"]), list(a["new_item_ids"])
        _items(order, old)
        if len(old) != len(new):
            raise ValueError("The number of items to be exchanged should match")
        by_id = {it["item_id"]: it for it in order["items"]}
        for o, n in zip(old, new):
            variants = db["products"][by_id[o]["product_id"]]["variants"]
            if n not in variants or not variants[n]["available"]:
                raise ValueError(f"New item {n} not found or available")
        order["status"] = "exchange requested"
        order["exchange_items"], order["exchange_new_items"] = sorted(old), sorted(new)
        order["exchange_payment_method_id"] = a["payment_method_id"]
        return copy.deepcopy(order)
    if name == "modify_user_address":
        user = _user(db, a.pop("user_id"))
        user["address"] = _address(**a)
        return copy.deepcopy(user)
    raise ValueError(f"Tool {name} not found")


# ---------------------------------------------------------------- the generator


def _catalogue(rng) -> dict:
    products = {}
    for p, pname in enumerate(PRODUCTS):
        pid = f"{1000000 + 7919 * (p + 1)}"
        variants = {}
        for v in range(4):
            iid = f"{5000000 + 104729 * (p + 1) + 131 * v}"
            variants[iid] = {
                "item_id": iid,
                "options": {"color": OPTIONS["color"][(p + v) % 5], "size": OPTIONS["size"][v]},
                "available": bool(v != 3 or rng.random() < 0.5),
                "price": round(float(rng.uniform(10, 200)), 2),
            }
        products[pid] = {"product_id": pid, "name": pname, "variants": variants}
    return products


def _address_of(rng) -> dict:
    city, state, zip_code = CITIES[rng.integers(len(CITIES))]
    return {
        "address1": f"{int(rng.integers(10, 999))} {STREETS[rng.integers(len(STREETS))]}",
        "address2": f"Suite {int(rng.integers(100, 999))}",
        "city": city,
        "state": state,
        "country": "USA",
        "zip": zip_code,
    }


def _describe(addr: dict) -> str:
    return f"{addr['address1']}, {addr['address2']}, {addr['city']}, {addr['state']} {addr['zip']}, {addr['country']}"


def _task_db(rng, products: dict, t: int) -> tuple[dict, str]:
    first, last = FIRST[rng.integers(len(FIRST))], LAST[rng.integers(len(LAST))]
    uid = f"{first.lower()}_{last.lower()}_{1000 + t}"
    pms = {
        f"credit_card_{7000 + 3 * t}": {"source": "credit_card"},
        f"gift_card_{8000 + 3 * t}": {"source": "gift_card"},
    }
    user = {
        "user_id": uid,
        "name": {"first_name": first, "last_name": last},
        "email": f"{first.lower()}.{last.lower()}{t}@example.com",
        "address": _address_of(rng),
        "payment_methods": pms,
        "orders": [],
    }
    orders = {}
    statuses = ["pending", "pending", "delivered", "delivered", "processed"]
    rng.shuffle(statuses)
    for o, status in enumerate(statuses):
        oid = f"#W{1000000 + 9973 * t + 17 * o}"
        pids = rng.choice(sorted(products), size=int(rng.integers(1, 3)), replace=False)
        items = []
        for pid in pids:
            iid = sorted(products[pid]["variants"])[int(rng.integers(3))]
            items.append(
                {
                    "item_id": iid,
                    "product_id": str(pid),
                    "name": products[pid]["name"],
                    "options": products[pid]["variants"][iid]["options"],
                }
            )
        orders[oid] = {
            "order_id": oid,
            "user_id": uid,
            "status": status,
            "items": items,
            "address": copy.deepcopy(user["address"]),
            "payment_history": [{"transaction_type": "payment", "payment_method_id": sorted(pms)[0]}],
        }
        user["orders"].append(oid)
    return {"users": {uid: user}, "orders": orders, "products": copy.deepcopy(products)}, uid


def _request(kind, rng, db, uid, used):
    """(user text, gold calls) of one request, or None when the task's orders cannot serve it."""
    user = db["users"][uid]
    orders = [o for o in user["orders"] if o not in used]
    by_status = {s: [o for o in orders if db["orders"][o]["status"] == s] for s in ("pending", "delivered")}
    pms = sorted(user["payment_methods"])
    if kind in ("cancel", "address", "payment") and not by_status["pending"]:
        return None
    if kind in ("return", "exchange") and not by_status["delivered"]:
        return None
    if kind in ("cancel", "address", "payment"):
        oid = by_status["pending"][rng.integers(len(by_status["pending"]))]
    elif kind in ("return", "exchange"):
        oid = by_status["delivered"][rng.integers(len(by_status["delivered"]))]
    else:
        oid = None
    if oid is not None:
        used.add(oid)
    look = {"name": "get_order_details", "arguments": {"order_id": oid}}
    if kind == "cancel":
        reason = REASONS[rng.integers(2)]
        return (
            f"Please cancel my order {oid}; it was {reason}.",
            [look, {"name": "cancel_pending_order", "arguments": {"order_id": oid, "reason": reason}}],
        )
    if kind == "address":
        addr = _address_of(rng)
        return (
            f"Order {oid} should ship to {_describe(addr)} instead.",
            [look, {"name": "modify_pending_order_address", "arguments": {"order_id": oid, **addr}}],
        )
    if kind == "payment":
        current = db["orders"][oid]["payment_history"][-1]["payment_method_id"]
        new = next(p for p in pms if p != current)
        return (
            f"I'd like to pay for order {oid} with my {user['payment_methods'][new]['source'].replace('_', ' ')}.",
            [
                {"name": "get_user_details", "arguments": {"user_id": uid}},
                look,
                {"name": "modify_pending_order_payment", "arguments": {"order_id": oid, "payment_method_id": new}},
            ],
        )
    if kind == "user_address":
        addr = _address_of(rng)
        return (
            f"I moved: my new default address is {_describe(addr)}.",
            [{"name": "modify_user_address", "arguments": {"user_id": uid, **addr}}],
        )
    item = db["orders"][oid]["items"][0]
    pm = pms[rng.integers(len(pms))]
    source = user["payment_methods"][pm]["source"].replace("_", " ")
    if kind == "return":
        return (
            f"I want to return the {item['name']} from order {oid}, refund to my {source}.",
            [
                look,
                {
                    "name": "return_delivered_order_items",
                    "arguments": {"order_id": oid, "item_ids": [item["item_id"]], "payment_method_id": pm},
                },
            ],
        )
    if kind == "exchange":  # noqa: RET503 (every kind returns)
        variants = db["products"][item["product_id"]]["variants"]
        options = [v for k, v in sorted(variants.items()) if k != item["item_id"] and v["available"]]
        new = options[rng.integers(len(options))]
        opts = f"{new['options']['color']} in size {new['options']['size']}"
        return (
            f"The {item['name']} in order {oid} is wrong; exchange it for the {opts}, any difference on my {source}.",
            [
                look,
                {"name": "get_product_details", "arguments": {"product_id": item["product_id"]}},
                {
                    "name": "exchange_delivered_order_items",
                    "arguments": {
                        "order_id": oid,
                        "item_ids": [item["item_id"]],
                        "new_item_ids": [new["item_id"]],
                        "payment_method_id": pm,
                    },
                },
            ],
        )


KINDS = ("cancel", "address", "payment", "return", "exchange", "user_address")


def generate(n_tasks: int, seed: int) -> list[dict]:
    """[{task_id, db, turns: [user text], gold: [[calls]]}] of n_tasks seeded retail tasks."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7A02]))
    products = _catalogue(rng)
    out = []
    for t in range(n_tasks):
        db, uid = _task_db(rng, products, t)
        user = db["users"][uid]
        if rng.random() < 0.5:
            ident = f"Hi, I'm {user['name']['first_name']} {user['name']['last_name']}, my email is {user['email']}."
            find = {"name": "find_user_id_by_email", "arguments": {"email": user["email"]}}
        else:
            ident = (
                f"Hello, this is {user['name']['first_name']} {user['name']['last_name']}, "
                f"zip code {user['address']['zip']}."
            )
            find = {
                "name": "find_user_id_by_name_zip",
                "arguments": {
                    "first_name": user["name"]["first_name"],
                    "last_name": user["name"]["last_name"],
                    "zip": user["address"]["zip"],
                },
            }
        turns, gold, used = [], [], set()
        for k in range(int(rng.integers(1, 4))):
            for _ in range(10):
                req = _request(KINDS[rng.integers(len(KINDS))], rng, db, uid, used)
                if req is not None:
                    break
            if req is None:
                break
            text, calls = req
            turns.append(f"{ident} {text}" if k == 0 else text)
            gold.append(([find] if k == 0 else []) + calls)
        out.append({"task_id": f"tau2-retail:{seed}:{t:04d}", "db": db, "turns": turns, "gold": gold})
    return out
