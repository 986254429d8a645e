"""Shop: search, product pages, a cart and checkout.

Distractors: search results with near-identical names (two USB-C cables), and "Buy now"
beside "Add to cart" in the same style. Double-tapping a product's picture likes it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, WIDTH, Rect
from episodelake.collectors.envs.sim.state import PRODUCTS, PhoneState, Product
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, ListBuilder, Widget

PACKAGE = "com.example.shop"


def search(query: str) -> list[Product]:
    """Products whose name or keyword contains the query, case-insensitively."""
    query = query.strip().lower()
    return [p for p in PRODUCTS.values() if query and (query in p.name.lower() or query in p.keyword)]


def cart_total(cart: dict[str, int]) -> str:
    cents = sum(PRODUCTS[pid].price_cents * qty for pid, qty in cart.items())
    return f"${cents // 100}.{cents % 100:02d}"


# --- handlers ------------------------------------------------------------------------------

def _submit_search(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    query = route.fields.get("search", "").strip()
    if query:
        state.push("shop", "results", query)


def _open_product(product_id: str, state: PhoneState) -> None:
    route = state.push("shop", "product", product_id)
    route.fields["qty"] = "1"


def _open_cart(state: PhoneState) -> None:
    state.push("shop", "cart")


def _step_qty(delta: int, state: PhoneState) -> None:
    route = state.route
    assert route is not None
    route.fields["qty"] = str(min(9, max(1, int(route.fields["qty"]) + delta)))


def _add_to_cart(product_id: str, state: PhoneState) -> None:
    route = state.route
    assert route is not None
    state.cart[product_id] = state.cart.get(product_id, 0) + int(route.fields["qty"])
    state.toast = "Added to cart"


def _buy_now(product_id: str, state: PhoneState) -> None:
    route = state.route
    assert route is not None
    state.push("shop", "checkout", f"{product_id}x{route.fields['qty']}")


def _like(product_id: str, state: PhoneState) -> None:
    if product_id in state.favorites:
        state.favorites.remove(product_id)
    else:
        state.favorites.append(product_id)


def _change_line(product_id: str, delta: int, state: PhoneState) -> None:
    quantity = state.cart.get(product_id, 0) + delta
    if quantity > 0:
        state.cart[product_id] = quantity
    else:
        state.cart.pop(product_id, None)


def _open_checkout(state: PhoneState) -> None:
    state.push("shop", "checkout")


def _order_lines(arg: str, cart: dict[str, int]) -> dict[str, int]:
    """A checkout is for the cart, or for one product (``p03x2``) after "Buy now"."""
    if not arg:
        return dict(cart)
    product_id, quantity = arg.split("x")
    return {product_id: int(quantity)}


def _place_order(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    lines = _order_lines(route.arg, state.cart)
    if not lines:
        return
    state.orders.append(lines)
    if not route.arg:
        state.cart.clear()
    state.back()
    state.toast = "Order placed"


# --- screens -------------------------------------------------------------------------------

def _cart_action(ui: UI) -> Widget:
    count = sum(ui.state.cart.values())
    action = ui.action("cart", "cart", f"Cart, {count} items", _open_cart)
    action.text = str(count) if count else ""
    ui.label("cart", count)
    return action


def _product_row(lst: ListBuilder, product: Product, prefix: str) -> None:
    thumb = Widget("image", Rect(0, 0, 150, 150), glyph=product.keyword, color=_product_color(product))
    lst.row(product.name, name=f"{prefix}_{product.id}", subtitle=product.price, leading=thumb,
            on_click=partial(_open_product, product.id), height=210)


def _product_color(product: Product) -> tuple[int, int, int]:
    palette = ((38, 50, 56), (0, 121, 107), (21, 101, 192), (173, 20, 87), (230, 81, 0), (85, 139, 47))
    return palette[int(product.id[1:]) % len(palette)]


def _home(ui: UI) -> None:
    ui.app_bar("Shop", actions=(_cart_action(ui),))
    ui.field(Rect(40, CONTENT_TOP + 10, WIDTH - 180, CONTENT_TOP + 150), "search", "Search products",
             on_submit=_submit_search, max_length=40)
    ui.icon_button(Rect(WIDTH - 160, CONTENT_TOP + 20, WIDTH - 40, CONTENT_TOP + 140), "search", "search_button",
                   "Search", _submit_search)
    lst = ui.list_view("featured_list", top=CONTENT_TOP + 170)
    lst.header("Featured")
    for product in PRODUCTS.values():
        if product.featured:
            _product_row(lst, product, "featured")
    lst.done()


def _results(ui: UI) -> None:
    route = ui.route
    assert route is not None
    ui.app_bar(f'Results for "{route.arg}"', back=PhoneState.back, actions=(_cart_action(ui),))
    lst = ui.list_view("result_list")
    found = search(route.arg)
    for product in found:
        _product_row(lst, product, "result")
    if not found:
        lst.add(Widget("text", Rect(80, 100, WIDTH - 80, 200), text="No results", role="muted",
                       align="center"), 300)
    lst.done()


def _product(ui: UI) -> None:
    route = ui.route
    assert route is not None
    product = PRODUCTS[route.arg]
    liked = product.id in ui.state.favorites
    ui.app_bar(product.name, back=PhoneState.back, actions=(_cart_action(ui),))
    top = CONTENT_TOP + 30
    picture = ui.add(Widget("image", Rect(60, top, WIDTH - 60, top + 700), rid=ui.rid("product_image"),
                            desc=f"{product.name} picture, double-tap to like", glyph=product.keyword,
                            color=_product_color(product), on_double_tap=partial(_like, product.id)))
    picture.children.append(Widget("image", Rect(WIDTH - 220, top + 30, WIDTH - 90, top + 160),
                                   rid=ui.rid("like"), desc="Liked" if liked else "Not liked",
                                   glyph="heart", checked=liked))
    ui.label("liked", liked)
    y = top + 740
    ui.text(Rect(60, y, WIDTH - 60, y + 90), product.name, name="product_name", size=64)
    ui.text(Rect(60, y + 100, 500, y + 180), product.price, name="price", size=58, role="accent")
    ui.text(Rect(520, y + 110, WIDTH - 60, y + 170), "4.5 stars (120 reviews)", size=TEXT_SMALL, role="muted",
            align="right")
    y += 230
    quantity = route.fields["qty"]
    ui.text(Rect(60, y + 30, 340, y + 110), "Quantity", size=TEXT_SMALL, role="muted")
    ui.icon_button(Rect(360, y, 490, y + 130), "minus", "qty_minus", "Decrease quantity", partial(_step_qty, -1),
                   role="tonal")
    ui.text(Rect(500, y + 20, 620, y + 110), quantity, name="qty", size=64, align="center")
    ui.icon_button(Rect(630, y, 760, y + 130), "plus", "qty_plus", "Increase quantity", partial(_step_qty, 1),
                   role="tonal")
    ui.label("qty", quantity)
    y += 190
    if y + 160 <= ui.bottom:
        ui.button(Rect(60, y, 520, y + 160), "Add to cart", "add_to_cart", partial(_add_to_cart, product.id))
        ui.button(Rect(560, y, WIDTH - 60, y + 160), "Buy now", "buy_now", partial(_buy_now, product.id))


def _cart(ui: UI) -> None:
    state = ui.state
    ui.app_bar("Cart", back=PhoneState.back)
    lst = ui.list_view("cart_list", bottom=ui.bottom - 260)
    for product_id, quantity in state.cart.items():
        product = PRODUCTS[product_id]
        line = Widget("row", Rect(0, 0, WIDTH, 300), rid=ui.rid(f"line_{product_id}"), desc=product.name)
        line.children += [
            Widget("text", Rect(60, 30, WIDTH - 60, 100), text=product.name, size=52),
            Widget("text", Rect(60, 110, 400, 170), text=product.price, size=TEXT_SMALL, role="muted"),
            Widget("icon_button", Rect(60, 180, 180, 290), rid=ui.rid(f"minus_{product_id}"),
                   desc=f"Decrease {product.name}", glyph="minus", role="tonal",
                   on_click=partial(_change_line, product_id, -1)),
            Widget("text", Rect(190, 200, 290, 270), rid=ui.rid(f"qty_{product_id}"), text=str(quantity),
                   size=52, align="center"),
            Widget("icon_button", Rect(300, 180, 420, 290), rid=ui.rid(f"plus_{product_id}"),
                   desc=f"Increase {product.name}", glyph="plus", role="tonal",
                   on_click=partial(_change_line, product_id, 1)),
            Widget("button", Rect(WIDTH - 360, 180, WIDTH - 60, 290), rid=ui.rid(f"remove_{product_id}"),
                   text="Remove", role="text", align="center",
                   on_click=partial(_change_line, product_id, -quantity)),
        ]
        lst.add(line, 320)
    if not state.cart:
        lst.add(Widget("text", Rect(80, 100, WIDTH - 80, 200), text="Your cart is empty", role="muted",
                       align="center"), 300)
    lst.done()
    bottom = ui.bottom
    ui.text(Rect(60, bottom - 240, 600, bottom - 170), f"Total {cart_total(state.cart)}", name="total", size=56)
    ui.button(Rect(60, bottom - 160, WIDTH - 60, bottom - 30), "Checkout", "checkout", _open_checkout,
              enabled=bool(state.cart))


def _checkout(ui: UI) -> None:
    route = ui.route
    assert route is not None
    lines = _order_lines(route.arg, ui.state.cart)
    ui.app_bar("Checkout", back=PhoneState.back)
    y = CONTENT_TOP + 60
    for product_id, quantity in lines.items():
        product = PRODUCTS[product_id]
        ui.text(Rect(60, y, 800, y + 80), f"{quantity} x {product.name}", size=TEXT_SMALL * 5 // 4)
        ui.text(Rect(800, y, WIDTH - 60, y + 80), product.price, size=TEXT_SMALL, align="right", role="muted")
        y += 100
    ui.text(Rect(60, y + 40, WIDTH - 60, y + 130), f"Total {cart_total(lines)}", name="total", size=60)
    ui.text(Rect(60, y + 160, WIDTH - 60, y + 230), "Pay with: Visa ending 4242", size=TEXT_SMALL, role="muted")
    ui.label("order", ",".join(f"{pid}x{qty}" for pid, qty in lines.items()))
    ui.button(Rect(60, ui.bottom - 200, WIDTH - 60, ui.bottom - 40), "Place order", "place_order", _place_order,
              enabled=bool(lines))


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {
    "main": _home, "results": _results, "product": _product, "cart": _cart, "checkout": _checkout,
}
