from toolkit.validate.context import Ctx


def check_runtime(ctx: Ctx) -> None:
    pass
