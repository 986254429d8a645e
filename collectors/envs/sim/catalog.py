"""The fixed world every simulated phone starts from: contacts, notes, alarms, products.

The world does not depend on the seed, so task ids (which name contacts, notes and products)
mean the same thing on every phone. Near-duplicates are deliberate distractors: "Anna Lee"
and "Anna Li", "Jon Park" and "John Parker", two USB-C cables that differ only in length.
"""

from __future__ import annotations

CONTACTS: tuple[tuple[str, str], ...] = (
    ("Aaron Brooks", "555-0101"),
    ("Alice Chen", "555-0102"),
    ("Anna Lee", "555-0103"),
    ("Anna Li", "555-0130"),
    ("Ben Carter", "555-0104"),
    ("Carlos Diaz", "555-0105"),
    ("Chloe Evans", "555-0106"),
    ("Daniel Kim", "555-0107"),
    ("David Nguyen", "555-0108"),
    ("Emma Wilson", "555-0109"),
    ("Ethan Wright", "555-0110"),
    ("Fatima Khan", "555-0111"),
    ("George Miller", "555-0112"),
    ("Grace Hall", "555-0113"),
    ("Hannah Scott", "555-0114"),
    ("Isaac Young", "555-0115"),
    ("John Parker", "555-0116"),
    ("Jon Park", "555-0161"),
    ("Julia Moreno", "555-0117"),
    ("Kevin Adams", "555-0118"),
    ("Laura Bennett", "555-0119"),
    ("Liam Foster", "555-0120"),
    ("Maria Garcia", "555-0121"),
    ("Mario Garcia", "555-0122"),
    ("Nina Patel", "555-0123"),
    ("Oliver Reed", "555-0124"),
    ("Priya Shah", "555-0125"),
    ("Quinn Taylor", "555-0126"),
    ("Rosa Lopez", "555-0127"),
    ("Sam Turner", "555-0128"),
    ("Sofia Rossi", "555-0129"),
    ("Victor Hughes", "555-0131"),
    ("Yuki Tanaka", "555-0132"),
    ("Zoe Martin", "555-0133"),
)

#: (title, body) of the notes already on the phone.
NOTES: tuple[tuple[str, str], ...] = (
    ("Shopping list", "eggs and bread"),
    ("Meeting notes", "discuss the roadmap"),
    ("Books to read", "Dune"),
    ("Gift ideas", "scarf for mom"),
)

#: (hour, minute, label, enabled) of the alarms already set.
ALARMS: tuple[tuple[int, int, str, bool], ...] = (
    (6, 30, "Gym", True),
    (7, 0, "Work", True),
    (9, 30, "Weekend", False),
)

#: (id, name, price in cents, search keyword, featured on the shop's front page).
PRODUCTS: tuple[tuple[str, str, int, str, bool], ...] = (
    ("p01", "USB-C Cable 1m", 999, "cable", True),
    ("p02", "USB-C Cable 2m", 1299, "cable", False),
    ("p03", "USB-C Charger 30W", 2499, "charger", True),
    ("p04", "Wireless Earbuds", 5900, "wireless", True),
    ("p05", "Wireless Mouse", 1999, "wireless", False),
    ("p06", "Wireless Keyboard", 3999, "wireless", False),
    ("p07", "Phone Case Black", 1499, "case", True),
    ("p08", "Phone Case Blue", 1499, "case", False),
    ("p09", "Screen Protector", 949, "protector", False),
    ("p10", "Power Bank", 2999, "power", True),
    ("p11", "Smart Watch", 12900, "watch", False),
    ("p12", "Bluetooth Speaker", 4500, "speaker", True),
    ("p13", "Coffee Mug", 850, "mug", False),
    ("p14", "Water Bottle", 1500, "bottle", False),
    ("p15", "Notebook A5", 625, "notebook", False),
    ("p16", "Desk Lamp", 3200, "lamp", False),
)

#: Conversations already on the phone: (contact name, [(from_me, text), ...]).
THREADS: tuple[tuple[str, tuple[tuple[bool, str], ...]], ...] = (
    ("Alice Chen", ((False, "See you at 6?"), (True, "Sure"))),
    ("Daniel Kim", ((True, "Here is the file"), (False, "Thanks!"))),
    ("Grace Hall", ((False, "Lunch tomorrow?"),)),
)

#: Calls already in the call log: (number, outgoing).
CALLS: tuple[tuple[str, bool], ...] = (
    ("555-0102", False),
    ("555-0119", True),
)

WIFI_NETWORKS: tuple[str, ...] = ("HomeNet", "Cafe_Guest", "Office-5G", "Neighbor_2G", "PrintHub")
PAIRED_DEVICES: tuple[str, ...] = ("Pixel Buds", "Car Audio", "Desk Speaker")
