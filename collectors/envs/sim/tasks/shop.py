"""Shop tasks: the cart (add, quantities, remove), likes, orders and prices."""

from __future__ import annotations

from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PRODUCTS, PhoneState
from episodelake.collectors.envs.sim.tasks.base import Params, Template, grid, normalise, product_id

ALL_PRODUCTS = [p.name for p in PRODUCTS.values()]
CART = [nav.Hop("main"), nav.Hop("cart", "cart")]


def _to_product(phone: Phone, item_id: str) -> nav.Action | None:
    """Search the product's keyword and open it from the results; None once on its page."""
    product = PRODUCTS[item_id]
    if nav.is_on(phone, "shop", "product", item_id):
        return None
    if nav.is_on(phone, "shop", "results", product.keyword):
        return nav.press(phone, f"result_{item_id}")
    if nav.is_on(phone, "shop", "main"):
        return nav.fill(phone, "search", product.keyword) or nav.press(phone, "search_button")
    return nav.navigate(phone, "shop", [nav.Hop("main")])


def _set_quantity(phone: Phone, quantity: int) -> nav.Action | None:
    route = phone.state.route
    assert route is not None  # called on the product page only
    current = int(route.fields["qty"])
    if current == quantity:
        return None
    return nav.press(phone, "qty_plus" if current < quantity else "qty_minus")


def _cart_check(state: PhoneState, params: Params) -> bool:
    return state.cart.get(product_id(params), 0) == int(params.get("quantity", "1"))


def _cart_solve(phone: Phone, params: Params) -> nav.Action | None:
    item_id = product_id(params)
    wanted = int(params.get("quantity", "1"))
    have = phone.state.cart.get(item_id, 0)
    if have:  # already in the cart in another quantity: fix it there
        if nav.is_on(phone, "shop", "cart"):
            return nav.press(phone, f"plus_{item_id}" if have < wanted else f"minus_{item_id}")
        return nav.navigate(phone, "shop", CART)
    return _to_product(phone, item_id) or _set_quantity(phone, wanted) or nav.press(phone, "add_to_cart")


def _cart_remove_setup(state: PhoneState, params: Params) -> None:
    state.cart = {product_id(params): 1, product_id(params, "keep"): 2}


def _cart_remove_check(state: PhoneState, params: Params) -> bool:
    return product_id(params) not in state.cart and state.cart.get(product_id(params, "keep")) == 2


def _cart_remove_solve(phone: Phone, params: Params) -> nav.Action | None:
    if nav.is_on(phone, "shop", "cart"):
        return nav.press(phone, f"remove_{product_id(params)}")
    return nav.navigate(phone, "shop", CART)


def _like_check(state: PhoneState, params: Params) -> bool:
    return product_id(params) in state.favorites


def _like_solve(phone: Phone, params: Params) -> nav.Action | None:
    return _to_product(phone, product_id(params)) or nav.tap(phone, "product_image", kind="double_tap")


def _order_check(state: PhoneState, params: Params) -> bool:
    return {product_id(params): 1} in state.orders


def _order_solve(phone: Phone, params: Params) -> nav.Action | None:
    item_id = product_id(params)
    route = phone.state.route
    if nav.is_on(phone, "shop", "checkout") and route is not None:
        return nav.press(phone, "place_order") if route.arg == f"{item_id}x1" else nav.BACK
    return _to_product(phone, item_id) or _set_quantity(phone, 1) or nav.press(phone, "buy_now")


def _price_check(state: PhoneState, params: Params) -> bool:
    return normalise(state.answer) == normalise(PRODUCTS[product_id(params)].price)


def _price_solve(phone: Phone, params: Params) -> nav.Action | None:
    product = PRODUCTS[product_id(params)]
    return _to_product(phone, product.id) or {"action": "answer", "text": product.price}


TEMPLATES = [
    Template("shop_add_to_cart", "Add one {item} to the shopping cart.", "medium", _cart_check, _cart_solve,
             grid(item=ALL_PRODUCTS)),
    Template("shop_add_quantity", "Put {quantity} of {item} in the shopping cart.", "hard", _cart_check,
             _cart_solve, grid(item=ALL_PRODUCTS[:8], quantity=["2", "3"])),
    Template("shop_remove_from_cart", "Remove {item} from the shopping cart.", "medium", _cart_remove_check,
             _cart_remove_solve, ({"item": "Coffee Mug", "keep": "Desk Lamp"},
                                  {"item": "Smart Watch", "keep": "Coffee Mug"},
                                  {"item": "USB-C Cable 1m", "keep": "USB-C Cable 2m"},
                                  {"item": "Phone Case Blue", "keep": "Phone Case Black"}),
             _cart_remove_setup),
    Template("shop_like", "Like the {item} in the shop.", "medium", _like_check, _like_solve,
             grid(item=ALL_PRODUCTS[::3])),
    Template("shop_order", "Order one {item} from the shop.", "hard", _order_check, _order_solve,
             grid(item=ALL_PRODUCTS[1::3])),
    Template("product_price", "How much does the {item} cost in the shop? Answer with the price.", "medium",
             _price_check, _price_solve, grid(item=ALL_PRODUCTS[2::3])),
]
