from toolkit.validate.context import Ctx


def check_lower(ctx: Ctx) -> None:
    pass
