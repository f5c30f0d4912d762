"""Short explanations shown with each diagnostic (the knowledge base has the long cards)."""

EXPLANATIONS: dict[str, str] = {
    "MPMD_DUP_REF": "mpmd_map gives each Ref argument its own kernel parameter; the same Ref (or "
    "two views of it) passed twice would alias two parameters, so JAX refuses it. The same "
    "plain array passed twice is fine: arrays are copied into the kernel.",
    "REF_PEER_TO_MULTICAST": "A peer view (remote_ref) already names one other device; a "
    "multicast view writes to all devices. JAX cannot combine the two: build the multicast "
    "view from the base ref.",
    "REF_MULTICAST_TO_PEER": "A multicast view writes to every device; a peer view names one. "
    "JAX cannot make a peer view of a multicast view: build the peer view from the base ref.",
    "XREF_UNKNOWN_BUFFER": "Each argument and capture names an entry of `buffers`.",
    "XREF_UNKNOWN_NAME": "The generated kernel would raise NameError: a statement can use the "
    "kernel parameters, the captures and views defined by earlier statements.",
    "XREF_DUPLICATE_NAME": "Kernel parameters are arguments, then outputs, then scratch, and "
    "their names must differ.",
    "AT_SLICE_CLAMPED": "Python slices clamp their stop to the dimension: the view is "
    "smaller than the slice suggests, and nothing warns at run time.",
    "REMOTE_DEVICE_OOB": "A device id outside the device mesh is not checked by JAX; on a "
    "GPU it addresses memory of no device (a crash or silent corruption).",
    "PROGRAM_ID_GPU_INTERP": "Under the GPU interpreter pl.program_id is 0 in every block, so "
    "blocks index the same data; use lax.axis_index(<grid axis>) (a `block` index).",
    "RACE": "Two accesses (blocks, threads or devices) to overlapping elements, at least one a "
    "write, with nothing ordering them; the result depends on timing.",
    "OOB_INDEX": "Integer indices inside a kernel are not checked when tracing; the access "
    "reads or writes outside the ref.",
    "INTERP_LIMIT": "The CPU interpreters cannot run this; it is a limit of this machine, not "
    "an error of the kernel (a GPU runs it).",
}
