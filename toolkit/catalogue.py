"""The catalogue of diagnostic codes: what JAX raises, its message, and the stage.

One row per stable code (``shared/design/ERRORS.md``, checked against jax 0.12).
``classify`` maps a raw JAX exception (also wrapped in a ``JaxRuntimeError``) back to
its code. The knowledge base (``mpmd_lab.knowledge``) adds the long explanations.
"""

from __future__ import annotations

import re

from mpmd_lab.record import Record


class Entry(Record):
    """One code: ``type`` the exception JAX raises ("" for mpmd-lab's own findings),
    ``pattern`` a regex that finds the message in JAX's text, ``also`` the other stages
    JAX raises it at (``stage`` is the earliest), ``loose`` for an entry whose
    ``pattern`` is generic (``^...$``, type-checked): a specific message of the same
    code, searched anywhere whatever the exception type."""

    __slots__ = ("code", "type", "pattern", "stage", "title", "severity", "also", "loose")

    def __init__(
        self,
        code: str,
        type: str,
        pattern: str,
        stage: str,
        title: str,
        severity: str = "error",
        also: tuple[str, ...] = (),
        loose: str = "",
    ) -> None:
        self.code = code
        self.type = type
        self.pattern = pattern
        self.stage = stage
        self.title = title
        self.severity = severity
        self.also = also
        self.loose = loose


ENTRIES: list[Entry] = [
    Entry(
        "MPMD_DUP_REF",
        "NotImplementedError",
        r"Cannot pass the same ref into a mpmd map multiple times",
        "trace",
        "The same Ref passed more than once",
    ),
    Entry(
        "MPMD_CLOSED_REF_ALIAS",
        "NotImplementedError",
        r"Closed-over ref aliases with a passed-in ref",
        "trace",
        "A captured Ref is also passed in",
    ),
    Entry(
        "MPMD_CAPTURED_ARRAY",
        "ValueError",
        r"captures non-scalar array constants",
        "trace",
        "The kernel captures an array",
    ),
    Entry(
        "MPMD_RETURNS_VALUE",
        "ValueError",
        r"should return None\. It returns",
        "trace",
        "The kernel returns a value",
    ),
    Entry(
        "MESH_DEVICE_ORDER",
        "NotImplementedError",
        r"Mosaic GPU only supports meshes with device ordering that follows row-major device ids",
        "gpu-lower",
        "A device mesh whose ids are not in row-major order",
    ),
    Entry(
        "SHARD_SPEC_AXIS",
        "ValueError",
        r"Resource axis: .* is not found in mesh|"
        r"shard_map (?:in|out)_specs argument must refer to an axis marked as manual",
        "build",
        "A partition spec names an axis the device mesh lacks",
        also=("trace",),
    ),
    Entry(
        "SHARD_SPEC_DUPLICATE",
        "DuplicateSpecError",
        r"A single NamedSharding spec specification can map every mesh axis to at most one "
        r"positional dimension",
        "build",
        "A partition spec uses one mesh axis twice",
        also=("trace",),
    ),
    Entry(
        "SHARD_SPEC_RANK",
        "ValueError",
        r"Length of sharding\.spec \(\d+\) must be equal to aval's ndim|"
        r"was given an (?:in|out)_specs entry which is too long",
        "build",
        "A partition spec longer than the value's rank",
        also=("trace",),
    ),
    Entry(
        "MPMD_SCRATCH_CORE_TYPE",
        "NotImplementedError",
        r"requires scratch_type to have a `core_type`",
        "trace",
        "Scratch with several meshes",
    ),
    Entry(
        "MPMD_NO_PROGRAMS",
        "ValueError",
        r"At least one mesh/function pair is required",
        "build",
        "No programs",
    ),
    Entry(
        "MPMD_NOT_MANUAL",
        "ValueError",
        r"mpmd_map requires all mesh axes to be Manual",
        "trace",
        "Device-mesh axes are not Manual (no shard_map)",
    ),
    Entry(
        "MPMD_GPU_SCRATCH",
        "NotImplementedError",
        r"Scratch operands are not supported by the Mosaic GPU mpmd_map lowering",
        "gpu-lower",
        "Scratch through pl.kernel does not lower",
    ),
    Entry(
        "MESH_CLUSTER_RANK",
        "ValueError",
        r"cluster= must be at most 3D",
        "build",
        "Cluster of more than 3 axes",
    ),
    Entry(
        "MESH_THREADS_PAIR",
        "ValueError",
        r"num_threads and thread_name must be either both set",
        "build",
        "Thread count without a name",
    ),
    Entry(
        "MESH_TOO_MANY_THREADS",
        "ValueError",
        r"Requested too many CUDA threads per block",
        "build",
        "Too many threads per block",
    ),
    Entry(
        "GPU_TOO_MANY_BARRIERS",
        "ValueError",
        r"Too many CTA barriers requested",
        "gpu-lower",
        "Too many barriers",
    ),
    Entry(
        "REF_PEER_TO_MULTICAST",
        "ValueError",
        r"Can't make a peer reference into a multicast reference\.",
        "trace",
        "A multicast view of a peer view",
    ),
    Entry(
        "REF_MULTICAST_TO_PEER",
        "ValueError",
        r"Can't make a multicast reference into a peer reference\.",
        "trace",
        "A peer view of a multicast view",
    ),
    Entry(
        "COLLECTIVE_AXES_NOT_ALL",
        "NotImplementedError",
        r"Only collective_axes that include all JAX device mesh",
        "gpu-lower",
        "Multicast over some device axes only",
    ),
    Entry(
        "MULTICAST_NO_DEVICE_MESH",
        "ValueError",
        r"JAX device mesh is required by (?:multicast copies|multimem_store|multimem_load_reduce)"
        r"|collective_axes requires a mesh context",
        "gpu-lower",
        "Multicast (a copy, a signal, a multimem op) without a device mesh",
    ),
    Entry(
        "MULTICAST_PLAIN_STORE",
        "NotImplementedError",
        r"Multicast references are not allowed in the lowering of this primitive",
        "gpu-lower",
        "A plain store through a multicast view",
    ),
    Entry(
        "DEVICE_ID_UNKNOWN_AXIS",
        "ValueError",
        r"Unrecognized axes in device_id",
        "gpu-lower",
        "remote_ref names an axis the device mesh lacks",
    ),
    Entry(
        "CLUSTER_REF_UNKNOWN_AXIS",
        "LookupError",
        r"Unknown cluster axis",
        "gpu-lower",
        "A cluster axis the cluster lacks (cluster_ref, ClusterBarrier)",
    ),
    Entry(
        "GPU_CLUSTER_SMEM_STORE",
        "ValueError",
        r"Unsupported memory space: #mosaic_gpu\.smem_cluster",
        "gpu-lower",
        "A plain store into another block's SMEM",
    ),
    Entry("AT_OOB_SLICE", "ValueError", r"Out of bound slice", "trace", "Slice out of bounds"),
    Entry(
        "AT_TOO_MANY_INDICES",
        "ValueError",
        r"`indices` must not be longer than `shape`",
        "trace",
        "More indices than dimensions",
    ),
    Entry(
        "BITCAST_1D_WIDTH_CHANGE",
        "NotImplementedError",
        r"Bitcast 1D ref with bitwidth change is not supported",
        "trace",
        "1-D bitcast that changes width",
    ),
    Entry(
        "BITCAST_SECOND_MINOR",
        "ValueError",
        r"Expected input and output shapes are the same after multiplying the second-minor"
        r" dimension",
        "trace",
        "Bitcast shape mismatch",
    ),
    Entry(
        "SWAP_SHAPE_MISMATCH",
        "ValueError",
        r"Invalid shape for `swap`",
        "trace",
        "Store of the wrong shape",
    ),
    Entry(
        "SWAP_DTYPE_MISMATCH",
        "ValueError",
        r"Invalid dtype for `swap`",
        "trace",
        "Store of the wrong dtype",
    ),
    Entry(
        "REMOTE_SMEM",
        "ValueError",
        r"Can't find the kernel argument",
        "gpu-lower",
        "A peer view of shared memory",
    ),
    Entry(
        "SEMAPHORE_FILL",
        "AttributeError",
        r"AbstractSemaphoreTyRules' has no attribute 'full'"
        r"|^'NoneType' object has no attribute 'full'$",
        "trace",
        "Filling a semaphore or barrier",
    ),
    Entry(
        "SEMAPHORE_ARITH",
        "TypeError",
        r"add does not accept dtype semaphore"
        r"|dtype=semaphore is not a valid dtype for JAX type promotion",
        "trace",
        "Arithmetic on a semaphore's value",
    ),
    Entry(
        "VALUE_DTYPE",
        "TypeError",
        r"(?:neg|sub) does not accept dtype bool",
        "trace",
        "Negating or subtracting booleans",
    ),
    Entry(
        "ADD_SHAPE_MISMATCH",
        "TypeError",
        r"\w+ got incompatible shapes for broadcasting"
        r"|Incompatible shapes for broadcasting: shapes=",
        "trace",
        "Adding (or combining) values of shapes that do not broadcast",
    ),
    Entry(
        "TMA_SHAPE_MISMATCH",
        "ValueError",
        r"Expected shapes to match, but src has shape|Expected source shape to be"
        r"|^zip\(\) argument \d is (?:shorter|longer)",
        "trace",
        "TMA copy between refs of different shapes",
    ),
    Entry(
        "GPU_WG_TRANSFORMS",
        "NotImplementedError",
        r"Transforms are not yet implemented for warpgroup semantics",
        "gpu-lower",
        "Transforms under warpgroup semantics",
    ),
    Entry(
        "RESHAPE_MINUS_ONE",
        "ValueError",
        r"At most one dimension can be -1|can only specify one unknown axis size",
        "trace",
        "More than one -1 in a reshape",
    ),
    Entry("RESHAPE_SIZE", "ValueError", r"cannot reshape", "trace", "Reshape to a different size"),
    Entry(
        "TRANSPOSE_RANK",
        "ValueError",
        r"Permutation .* does not match the rank|transpose permutation isn't a permutation of",
        "trace",
        "Permutation of the wrong rank",
    ),
    Entry(
        "TRANSPOSE_INVALID_PERM_GPU",
        "RuntimeError",
        r"Invalid permutation when attempting to create an AffineMap",
        "gpu-lower",
        "Invalid permutation",
    ),
    Entry(
        "TRANSPOSE_TMEM",
        "ValueError",
        r"Can't transpose a TMEM reference",
        "trace",
        "Transpose of a TMEM ref",
    ),
    Entry(
        "TRANSPOSE_REF_RAW_BUG",
        "ValueError",
        r"The 'memory_space' attribute is not available on traced array",
        "trace",
        "transpose_ref on a raw ref (a JAX bug)",
    ),
    Entry(
        "GPU_LAYOUT_INFERENCE",
        "ValueError",
        r"Failed to infer a possible set of layouts",
        "gpu-lower",
        "Layout inference failed",
    ),
    Entry(
        "SWIZZLE_VALUE",
        "ValueError",
        r"Swizzle \d+ is not supported",
        "build",
        "Unsupported swizzle",
    ),
    Entry(
        "SWIZZLE_TRAILING_DIM",
        "ValueError",
        r"Swizzle \d+ requires the trailing dimension",
        "trace",
        "Swizzle wider than the trailing dim",
    ),
    Entry(
        "TMEM_DTYPE_PACKED",
        "ValueError",
        r"dtypes narrower than 32-bit require",
        "build",
        "Narrow TMEM dtype without packed",
    ),
    Entry(
        "TMEM_ONLY_ARGS",
        "ValueError",
        r"packed, collective and layout arguments are only supported for TMEM",
        "build",
        "TMEM-only arguments on another memory space",
    ),
    Entry(
        "TMEM_NO_TRANSFORMS",
        "ValueError",
        r"transforms are not supported for TMEM",
        "build",
        "Transforms on TMEM scratch",
    ),
    Entry(
        "EXPR_ZERO_DIVISION",
        "ZeroDivisionError",
        r"^integer (division or )?modulo by zero",
        "trace",
        "An index expression divides Python ints by zero",
    ),
    Entry(
        "UNBOUND_AXIS",
        "NameError",
        r"Found an unbound axis name",
        "trace",
        "An axis name no mesh binds",
        also=("interpret",),
    ),
    # the layout and lowering rules of issue 18 (mpmd_lab.layout_rules; jax 0.12)
    Entry(
        "GPU_GMEM_SCRATCH",
        "NotImplementedError",
        r"^Unsupported memory space: gmem$",
        "gpu-lower",
        "GMEM scratch in plgpu.kernel",
    ),
    Entry(
        "SMEM_CAPACITY",
        "ValueError",
        r"Mosaic GPU kernel exceeds available shared memory",
        "gpu-lower",
        "More SMEM scratch than the GPU has",
    ),
    Entry(
        "TMEM_PLAIN_ACCESS",
        "ValueError",
        r"Expected the same number of in_tmem_layouts \(0\) as TMEM ref operands",
        "gpu-lower",
        "A plain load or store of a TMEM ref",
    ),
    Entry(
        "TMEM_RESHAPE",
        "NotImplementedError",
        r"CollapseShape is only implemented for variables in SMEM",
        "gpu-lower",
        "A reshaped TMEM view",
    ),
    Entry(
        "TILED_SLICE_ALIGN",
        "ValueError",
        r"Expected slice start \(.*\) and slice size \(.*\) to be divisible by the tile size",
        "gpu-lower",
        "A slice of a tiled ref that does not fall on tile boundaries",
    ),
    Entry(
        "TILED_INDEX_TYPE",
        "TypeError",
        r"^Unsupported index type: <class '[\w.]*DynamicJaxprTracer'>$",
        "gpu-lower",
        "An integer index into a tiled dimension",
    ),
    Entry(
        "SWIZZLED_SLICE",
        "ValueError",
        r"^Swizzled dims cannot be sliced$",
        "gpu-lower",
        "A slice of the swizzled (minor) dimension",
    ),
    Entry(
        "SWIZZLED_INDEX",
        "NotImplementedError",
        r"Non-slice indices are not supported in 2 minormost dims",
        "gpu-lower",
        "An integer index in the two minor dims of a swizzled ref",
    ),
    Entry(
        "TILED_RESHAPE",
        "NotImplementedError",
        r"Unfolding dimensions is not supported when commuting|Folding tiled dimensions "
        r"into untiled|Cannot commute `UntilingTransform` with `ReshapeTransform`"
        r"|Commuting a `UntilingTransform` with a `ReshapeTransform` is not supported",
        "gpu-lower",
        "A reshape a tiled ref's tiling cannot follow",
    ),
    Entry(
        "SWIZZLED_RESHAPE",
        "ValueError",
        r"^Reshape shape .* is not divisible by swizzle elements",
        "gpu-lower",
        "A reshape of a swizzled ref that changes its minor dimension",
    ),
    Entry(
        "TRACED_BOOL",
        "TracerBoolConversionError",
        r"Attempted boolean conversion of traced array",
        "gpu-lower",
        "A traced value where Python needs a bool (a dynamic start in a swizzled row)",
    ),
    Entry(
        "TMA_SRC_TRANSFORM",
        "NotImplementedError",
        r"^<class 'jax\._src\.state\.types\.BitcastTransform'>$",
        "gpu-lower",
        "A TMA copy from a bitcast SMEM view",
    ),
    Entry(
        "SMEM_TRANSFORMS_ORDER",
        "NotImplementedError",
        r"^Unsupported transforms \[(?:<SwizzlingMode|TileTransform)",
        "gpu-lower",
        "An SMEM layout the Mosaic GPU dialect cannot take (a swizzle before a tiling)",
    ),
    Entry(
        "CAPTURED_SCALAR",
        "AssertionError",
        r"Scalar type must match ShapedArray dtype, got: memref<",
        "gpu-lower",
        "A kernel that closes over a rank-0 array",
    ),
    Entry(
        "GPU_SMEM_TRANSFER",
        "UnsupportedTransferError",
        r"Tiled strides must be a multiple of the vector length",
        "gpu-lower",
        "A register transfer from or to tiled SMEM the lowering cannot make",
    ),
    Entry(
        "GPU_GMEM_TRANSFER",
        "TransferPlanDerivationError",
        r"^GMEM transfer ",
        "gpu-lower",
        "A GMEM load or store of a value laid out for tiled SMEM (narrow dtypes)",
    ),
    Entry(
        "SMEM_NOT_CONTIGUOUS",
        "NotImplementedError",
        r"We cannot apply swizzle to non-contiguous refs",
        "gpu-lower",
        "An SMEM view with no contiguous dim (an integer index on the minor dim)",
    ),
    Entry(
        "TMA_TILING_NO_SWIZZLE",
        "ValueError",
        r"Cannot apply tiling .* with no swizzle to memref",
        "gpu-lower",
        "A TMA copy of SMEM tiled by more dims than the GMEM ref has, unswizzled",
    ),
    Entry(
        "TMA_GMEM_STRIDES",
        "ValueError",
        r"Async copies require all GMEM strides except the last one to be a multiple of 16"
        r"|Async copies with swizzle=.* require the last dimension of the slice",
        "gpu-lower",
        "A TMA copy whose GMEM rows or box are not whole 16-byte units",
    ),
    Entry(
        "TMA_MINOR_STRIDE",
        "ValueError",
        r"TMA requires the stride of the last dimension after transforming the GMEM",
        "gpu-lower",
        "A TMA copy from a transposed SMEM view",
    ),
    Entry(
        "TMA_SMEM_NOT_CONTIGUOUS",
        "ValueError",
        r"async_copy needs the SMEM reference to be contiguous",
        "gpu-lower",
        "A TMA copy from a strided SMEM view",
    ),
    Entry(
        "HLO_INTERP_NO_DISCHARGE",
        "NotImplementedError",
        # (a bitcast's class is the TMA lowering's error, TMA_SRC_TRANSFORM, not this one)
        r"No state discharge rule|^<class '[\w.]+(?:Ref|(?<!Bitcast)Transform)'>$",
        "interpret",
        "The HLO interpreter cannot run this transform",
        severity="warning",  # a limit of the CPU, not of the kernel
    ),
    Entry(
        "GPU_INTERP_UNSUPPORTED_TRANSFORM",
        "ValueError",
        r"Unsupported transform: "
        r"|'(?:PeerMemRef|ClusterRef\w*)' object has no attribute (?!'get_indexer_shape')",
        "interpret",
        "JAX's CPU interpreter cannot run this view (simulate can)",
        severity="warning",  # a limit of the CPU, not of the kernel
    ),
    Entry(
        "GPU_INTERP_MULTICAST",
        "AttributeError",
        r"'MulticastRef' object has no attribute (?!'get_indexer_shape')",
        "interpret",
        "JAX's CPU interpreter cannot run multicast (simulate can)",
        severity="warning",  # a limit of the CPU, not of the kernel
    ),
    Entry(
        "GPU_INTERP_NOT_A_REF",
        "TypeError",
        r"ref must be a reference, got",
        "interpret",
        "The GPU interpreter got a non-ref",
    ),
    Entry(
        "RACE_DETECTED",
        "RuntimeError",
        r"RACE DETECTED",
        "interpret",
        "A race: unordered accesses to the same elements, one a write",
    ),
    Entry("OOB_READ", "IndexError", r"Out-of-bounds read", "interpret", "Out-of-bounds read"),
    Entry(
        "GPU_VERIFICATION",
        "VerificationError",
        r"verification error|failed to verify|VerificationError",
        "gpu-lower",
        "Mosaic GPU IR failed verification",
    ),
    # rows added by the validate helper (found by running jax 0.12)
    Entry(
        "RESHAPE_NOT_DIVISIBLE",
        "ValueError",
        r"do not evenly divide the size of the ref",
        "trace",
        "Reshape with -1 that does not divide the size",
    ),
    Entry(
        "AT_NEGATIVE_SLICE",
        "NotImplementedError",
        r"has negative bounds|\): invalid memref size",
        "gpu-lower",
        "pl.ds with a negative start",
    ),
    Entry(
        "GPU_SPLAT_STORE",
        "NotImplementedError",
        r"Arrays with the splat layout can only be stored",
        "gpu-lower",
        "Fill of a size that is not a multiple of 128",
    ),
    Entry(
        "DEVICE_ID_RANK",
        "ValueError",
        r"Number of device ids must match the number of mesh axes",
        "gpu-lower",
        "An integer device id with no (or a multi-axis) device mesh",
    ),
    Entry(
        "TMA_SRC_NOT_SMEM",
        "ValueError",
        r"src must be a SMEM reference",
        "trace",
        "tma_store from a ref that is not in SMEM",
    ),
    Entry(
        "TMA_DST_NOT_GMEM",
        "ValueError",
        r"dst must be a GMEM reference",
        "trace",
        "tma_store into a ref that is not in GMEM",
    ),
    Entry(
        "CLUSTER_REF_MULTI_AXIS",
        "NotImplementedError",
        r"Only overriding a single cluster axis is supported",
        "gpu-lower",
        "cluster_ref over more than one axis",
    ),
    Entry(
        "STORE_TO_ARRAY",
        "TypeError",
        r"JAX arrays are immutable and do not support in-place item assignment",
        "trace",
        "A store into a captured array",
    ),
    Entry(
        "ARG_TRANSFORM_ON_ARRAY",
        "TypeError",
        r"_IndexUpdateRef.* is not a valid JAX type",
        "trace",
        "A view of a plain array passed as an argument",
    ),
    Entry(
        "REF_NOT_A_REF",
        "TypeError",
        r"^ref must be a reference$",
        "trace",
        "remote/multicast/cluster view of a plain array",
    ),
    Entry(
        "GPU_TRANSFORMS_UNSUPPORTED",
        "NotImplementedError",
        r"^\((?:\w+Transform|NDIndexer)\(",
        "gpu-lower",
        "A transform sequence the Mosaic GPU lowering cannot handle",
    ),
    Entry(
        "TRANSPOSE_NEGATIVE_PERM_GPU",
        "TypeError",
        r"get_permutation\(\): incompatible function arguments",
        "gpu-lower",
        "A transpose with negative axes",
    ),
    Entry(
        "GPU_CLUSTER_GMEM",
        "KeyError",
        r"ValueSite\(operation=",
        "gpu-lower",
        "Layout inference meets a GMEM ref it cannot place (cluster_ref, dot operand)",
    ),
    # rows added by the knowledge helper for codes the validate rules emit
    # rows found by the validate helper running jax 0.12
    Entry(
        "TMA_DTYPE_MISMATCH",
        "ValueError",
        r"Expected dtypes to match but src had type",
        "trace",
        "A TMA copy between refs of different dtypes",
    ),
    Entry(
        "MULTIMEM_DST_NOT_GMEM",
        "ValueError",
        r"^ref must be a GMEM reference, got",
        "trace",
        "A multimem op on a ref that is not in GMEM",
    ),
    Entry(
        "MULTIMEM_MISMATCH",
        "ValueError",
        r"^Value (?:dtype|shape) .* does not match ref (?:dtype|shape)",
        "trace",
        "multimem_store of a value of another dtype or shape",
    ),
    Entry(
        "GPU_RESHAPE_STRIDED",
        "NotImplementedError",
        r"by composing independent folds/unfolds|^strides=\[.*fold_rank="
        r"|strides=\[[\d, ]*\], ref_ty\.shape=\[[\d, ]*\], dim=",
        "gpu-lower",
        "A reshape of a strided (sliced) view",
    ),
    Entry(
        "GPU_8BIT_ARITH",
        "NotImplementedError",
        r"Pointwise operations on 8-bit types are unsupported",
        "gpu-lower",
        "Arithmetic on 8-bit values",
    ),
    Entry(
        "ARRAY_NO_METHOD",
        "AttributeError",
        r"(?:_IndexUpdateRef'? object|DynamicJaxprTracer|ArrayImpl'? object) has no attribute",
        "trace",
        "A ref method applied to a plain array (or to array.at[...])",
    ),
    Entry(
        "ARG_VIEW_PLGPU",
        "TransformedRefAvalError",
        r"TransformedRefs cannot be abstractified",
        "trace",
        "A view of a Ref passed as an argument to plgpu.kernel",
    ),
    Entry(
        "SHARDED_REF_SLICE",
        "ValueError",
        r"sharded ref \(array reference\) can only be (?:sliced along unsharded axes|indexed by)",
        "trace",
        "Slicing a sharded input along its sharded axis (no shard_map)",
    ),
    Entry(
        "JAX_ASSERTION",
        "AssertionError",
        r"^$",
        "trace",
        "JAX failed an internal assertion (pl.program_id outside a kernel, scratch transforms)",
    ),
    Entry(
        "OOB_WRITE",
        "ValueError",
        r"Out-of-bounds swap",
        "interpret",
        "Out-of-bounds write (GPU interpreter)",
    ),
    Entry(
        "MULTIMEM_STORE_WIDTH",
        "ValueError",
        r"Only 32-, 64- and 128-bit stores are supported",
        "gpu-lower",
        "A multimem store of fewer than 32 bits per thread",
    ),
    # rows added for the collectives language (semaphores, barriers, async copies, loops,
    # compute), each found by running jax 0.12's trace and Mosaic GPU lowering
    Entry(
        "SEMAPHORE_READ_SMEM",
        "NotImplementedError",
        r"No layout inference rule defined for .*unrealized_conversion_cast"
        r"(?s:.)*address_space<workgroup>",
        "gpu-lower",
        "pl.semaphore_read of an SMEM ref",
    ),
    Entry(
        "SEMAPHORE_NOT_A_REF",
        "ValueError",
        r"Cannot \w+ on a non-semaphore Ref",
        "trace",
        "A semaphore op on a plain array",
    ),
    Entry(
        "SEMAPHORE_NOT_SCALAR",
        "ValueError",
        r"Cannot \w+ on a non-\(\)-shaped semaphore",
        "trace",
        "A semaphore op on an array of semaphores (or on a non-scalar ref)",
    ),
    Entry(
        "SEMAPHORE_WRONG_TYPE",
        "ValueError",
        r"Must \w+ semaphores of the following types",
        "trace",
        "A semaphore op on a ref that is not a semaphore",
    ),
    Entry(
        "SEMAPHORE_VIEW_TRANSFORM",
        "AttributeError",
        r"object has no attribute 'get_indexer_shape'",
        "trace",
        "A semaphore view whose last transform is not an index",
    ),
    Entry(
        "GPU_TRACED_CONSTANT",
        "NotImplementedError",
        r"Unsupported constant: ",
        "gpu-lower",
        "A traced value where the lowering needs a constant (a signal's increment)",
    ),
    Entry(
        "SIGNAL_MULTICAST_AXES",
        "ValueError",
        r"collective_axes .* must equal entire mesh axes",
        "gpu-lower",
        "A multicast signal along some device axes only",
    ),
    Entry(
        "TMA_SRC_NOT_GMEM",
        "ValueError",
        r"src must be a GMEM reference",
        "trace",
        "copy_gmem_to_smem from a ref that is not in GMEM",
    ),
    Entry(
        "TMA_DST_NOT_SMEM",
        "ValueError",
        r"dst must be a SMEM reference",
        "trace",
        "copy_gmem_to_smem into a ref that is not in SMEM",
    ),
    Entry(
        "BARRIER_NOT_SMEM",
        "ValueError",
        r"barrier must be a (?:SMEM )?reference",
        "trace",
        "A barrier op on a ref that is not in SMEM (a semaphore, a GMEM ref)",
    ),
    Entry(
        "BARRIER_NOT_A_BARRIER",
        "AttributeError",
        r"'jaxlib\.mlir\._mlir_libs\._mlir\.ir\.OpResult' object has no attribute "
        r"'(?:wait|arrive|as_barrier_memref)'",
        "gpu-lower",
        "A barrier op on an SMEM array that is not a barrier",
    ),
    Entry(
        "BARRIER_NOT_SINGLE",
        "ValueError",
        r"Operation is only valid for a single barrier",
        "gpu-lower",
        "A barrier op on a whole array of barriers",
    ),
    Entry(
        "BARRIER_TRANSFORM",
        "ValueError",
        r"Barrier does not support arbitrary transforms",
        "gpu-lower",
        "A barrier view through a transform other than an index",
    ),
    Entry(
        "TMA_LOAD_NO_BARRIER",
        "ValueError",
        r"copy_gmem_to_smem without a barrier is only supported on pre-Hopper GPUs",
        "gpu-lower",
        "A TMA load without a barrier",
    ),
    Entry(
        "MULTICAST_TMA_LOAD",
        "ValueError",
        r"Multicast refs are not supported by this primitive",
        "gpu-lower",
        "A TMA load through a multicast view",
    ),
    Entry(
        "TMA_GMEM_TRANSFORM",
        "NotImplementedError",
        r"Non-indexing transforms on GMEM refs are not implemented",
        "gpu-lower",
        "A TMA copy of a transposed, reshaped, bitcast or cluster view of GMEM",
    ),
    Entry(
        "IM2COL_TRANSFORMED_REF",
        "TypeError",
        r"im2col_ref must be applied to an untransformed reference",
        "trace",
        "plgpu.im2col_ref of a view, not of the ref itself",
    ),
    Entry(
        "IM2COL_WINDOW",
        "ValueError",
        r"im2col_ref requires 1, 2, or 3 spatial dimensions|\(pad_lo, pad_hi\) pairs in padding"
        r"|window_shape\[\d+\] must be in \[1, \d+\]|padding\[\d+\](\[[01]\])? must be",
        "trace",
        "An im2col window or padding outside the TMA's range",
    ),
    Entry(
        "IM2COL_SHAPE",
        "ValueError",
        r"im2col_ref with \d+ spatial dims requires a rank-|im2col_ref spatial dim \d+ has "
        r"non-positive output size",
        "trace",
        "An im2col view of a ref that is not (N, *spatial, C) with room for a window",
    ),
    Entry(
        "IM2COL_NOT_A_REF",
        "ValueError",
        r"Can only call `im2col_ref` on a `Ref`",
        "trace",
        "plgpu.im2col_ref of an array, not a Ref",
    ),
    Entry(
        "IM2COL_NOT_INDEXED",
        "NotImplementedError",
        r"Only indexing is supported on im2col-transformed refs",
        "trace",
        "A TMA load of an im2col view transformed other than by indexing",
    ),
    Entry(
        "IM2COL_INDEXING",
        "ValueError",
        r"im2col_ref must be indexed with a unit-stride row slice",
        "trace",
        "A TMA load of an im2col view not indexed down to (rows, channels)",
    ),
    Entry(
        "IM2COL_WARPGROUP",
        "NotImplementedError",
        r"im2col copies are not supported under Warpgroup lowering semantics",
        "gpu-lower",
        "A TMA load of an im2col view in a warpgroup-semantics kernel",
    ),
    Entry(
        "TMA_SMEM_CLUSTER",
        "ValueError",
        r"Only SMEM <-> GMEM copies supported",
        "gpu-lower",
        "A TMA copy from or into another block's SMEM",
    ),
    Entry(
        "TMA_LAST_DIM_BITS",
        "ValueError",
        r"Async copies require the number of bits copied along the last dimension",
        "gpu-lower",
        "A TMA copy whose last dimension is not a multiple of 16 bytes",
    ),
    Entry(
        "MULTIMEM_PEER_REF",
        "NotImplementedError",
        r"Peer device references are not allowed in the lowering of this primitive",
        "gpu-lower",
        "A multimem op through a peer view",
    ),
    Entry(
        "MULTIMEM_LOAD_WIDTH",
        "ValueError",
        r"Only 32-, 64- and 128-bit loads are supported",
        "gpu-lower",
        "A multimem load of fewer than 32 bits per thread",
    ),
    Entry(
        "GPU_WG_STRIDED_SIZE",
        "ValueError",
        r"\(WGStridedFragLayout\(shape=\([\d, ]*\), vec_size=\d+\), 128\)",
        "gpu-lower",
        "A strided layout over a warpgroup of a size that is not a multiple of 128",
    ),
    Entry(
        "DOT_SHAPE_MISMATCH",
        "ValueError",
        r"Incompatible shapes for matrix multiplication",
        "trace",
        "A dot whose operands' K dimensions differ",
    ),
    Entry(
        "DOT_DTYPE_MISMATCH",
        "ValueError",
        r"Mixed input dtypes for matrix multiplication unsupported",
        "trace",
        "A dot of operands of different dtypes",
    ),
    Entry(
        "DOT_OPERAND_NOT_SMEM",
        "ValueError",
        r"Unsupported memory space for: memref",
        "gpu-lower",
        "A dot whose lhs is not in SMEM",
    ),
    Entry(
        "DOT_SMEM_TILING",
        "ValueError",
        r"No valid tiling found for SMEM reference",
        "gpu-lower",
        "A dot operand no WGMMA tiling divides",
    ),
    Entry(
        "DOT_DTYPE",
        "ValueError",
        r"Only f16 WGMMA supports transposes",
        "gpu-lower",
        "A dot of operands that are not 16-bit floats",
    ),
    Entry(
        "DOT_INT_ACC",
        "TypeError",
        r"is_signed must be non-None if and only if the MLIR type is an integer type",
        "gpu-lower",
        "A dot of 8-bit integers (into a float32 accumulator)",
    ),
    Entry(
        "DOT_N_TOO_LARGE",
        "ValueError",
        r"N must be a multiple of 8 and <= 256",
        "gpu-lower",
        "A dot wider than 256 columns",
    ),
    Entry(
        "LOOP_PYTHON_TRACED",
        "TracerIntegerConversionError",
        r"The __index__\(\) method was called on traced array",
        "trace",
        "A Python loop over traced bounds",
    ),
    # last: very generic messages
    Entry(
        "DOT_RANK",
        "ValueError",
        r"^(?:too many|not enough) values to unpack \(expected 2",
        "trace",
        "A dot operand that is not a matrix",
    ),
    Entry(
        "TRANSPOSE_BAD_AXIS",
        "IndexError",
        r"^tuple index out of range$",
        "trace",
        "Permutation names an axis the ref lacks",
        loose=r"axis -?\d+ is out of bounds for array of dimension",  # an array's transpose
    ),
    Entry(
        "BITCAST_1D_SAME_WIDTH_BUG",
        "IndexError",
        r"^list index out of range$",
        "trace",
        "1-D same-width bitcast (a JAX bug)",
    ),
    Entry(
        "MPMD_GPU_MESH_NOT_COMBINABLE",
        "NotImplementedError",
        r"^$",
        "trace",
        "Two Mosaic GPU meshes in one call",
    ),
]

BY_CODE: dict[str, Entry] = {e.code: e for e in ENTRIES}

#: Codes mpmd-lab reports that JAX itself never raises (or raises only on a GPU).
OWN = {
    "SCHEMA": ("not a scenario", "schema"),
    "XREF_UNKNOWN_BUFFER": ("an argument names a buffer that does not exist", "schema"),
    "XREF_UNKNOWN_NAME": ("a statement names an unknown parameter or view", "schema"),
    "XREF_DUPLICATE_NAME": ("a name is defined twice", "schema"),
    "REMOTE_DEVICE_OOB": ("remote_ref names a device outside the mesh", "gpu-run"),
    "AT_SLICE_CLAMPED": ("slice stop past the end is silently clamped", "trace"),
    "PROGRAM_ID_GPU_INTERP": (
        "pl.program_id is 0 in every block under the GPU interpreter",
        "interpret",
    ),
    "RACE": (
        "accesses from different blocks, threads or devices overlap, one a write",
        "gpu-run",
    ),
    "OOB_INDEX": ("an integer index is out of bounds", "interpret"),
    "INTERP_LIMIT": ("the CPU interpreters cannot run this (a limit of this machine)", "interpret"),
    "RULES_DISAGREE": ("the static rules and JAX disagree", "trace"),
    "RUN_TIMEOUT": ("the run did not finish in time", "interpret"),
    "IMPORT_TIMEOUT": ("tracing the function to import did not finish in time", "trace"),
    "ALIASED_REF": ("one Ref passed twice to plgpu.kernel, written through one of them", "trace"),
    "IMPORT_UNSUPPORTED": (
        "the import could not carry part of the kernel: the scenario is partial",
        "trace",
    ),
    "RUN_CRASHED": ("the child process running JAX died", "interpret"),
    "RUN_CANCELLED": ("the run was cancelled and its JAX worker stopped", "interpret"),
    "JAX_UNKNOWN": ("JAX raised an error no rule knows", "trace"),
    "SCRATCH_TRANSFORM": ("scratch transforms are tiling or swizzle only", "schema"),
    "SCRATCH_ONLY_TRANSFORM": ("tiling or swizzle applied to a view (scratch only)", "schema"),
    "CODEGEN": ("the scenario cannot be written as a JAX call", "schema"),
    "GPU_UNAVAILABLE": ("the gpu backend was asked for but JAX sees no GPU", "gpu-run"),
    "PROCESSES_UNSUPPORTED": (
        "the call cannot run as several local processes (devices, interpreter, backend)",
        "interpret",
    ),
    "SIMULATE_UNAVAILABLE": ("the simulate backend cannot be imported", "interpret"),
    "RUN_ERROR": ("the run failed before JAX reported an error (Run panel)", "gpu-run"),
    # the traffic simulator (mpmd_lab.simulator) stops at a statement it cannot model
    "SIM_DTYPE_MISMATCH": ("simulated store or add of values of different dtypes", "gpu-run"),
    "SIM_SHAPE_MISMATCH": ("simulated add of values of different shapes", "gpu-run"),
    "SIM_TOO_LARGE": ("too many threads x statements for the simulator", "gpu-run"),
    "SIM_UNSUPPORTED": ("something the traffic simulator does not model", "gpu-run"),
    # synchronisation, judged by the engine (mpmd_lab.validate.sync, mpmd_lab.simulator)
    "DEADLOCK_SEMAPHORE": ("a semaphore wait no signal can satisfy (a hang on a GPU)", "gpu-run"),
    "DEADLOCK_BARRIER": ("a barrier wait whose phase can never complete (a hang)", "gpu-run"),
    "SEMAPHORE_IMBALANCE": ("a semaphore is not zero when the kernel ends", "gpu-run"),
    "SYNC_NOT_CHECKED": ("too many threads for the static check to run every one", "gpu-run"),
    "SYNC_BY_SYMMETRY": ("a big mesh judged on small rings by symmetry (a note)", "gpu-run"),
}

#: Errors of a generated call that are mpmd-lab codes, not JAX's (tried after ENTRIES).
OWN_PATTERNS: list[Entry] = [
    Entry(
        "INTERP_LIMIT",
        "",
        r"nan \+ (?:semaphore|barrier)\b|Barrier remains allocated at key"
        r"|Remote signal not implemented|Interpret mode does not support copy_gmem_to_smem",
        "interpret",
        "The CPU interpreters cannot run this (a limit of this machine)",
    ),
    Entry(
        "XREF_UNKNOWN_NAME",
        "NameError",
        r"^name '\w+' is not defined$",
        "schema",
        "A statement names an unknown parameter or view",
    ),
    Entry(
        "XREF_DUPLICATE_NAME",
        "SyntaxError",
        r"^duplicate argument '\w+' in function definition",
        "schema",
        "A name is defined twice",
    ),
]


_WRAPPER = re.compile(r"^(?:jax\.errors\.|jaxlib\.\S*\.)?JaxRuntimeError")
#: ``SomeError: message`` lines (also ``pkg.mod.SomeError: message``) in pasted text.
_EXC_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Warning))(?::[ \t]?(.*))?$", re.M
)
_TRACE_LINE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|File \"|[\^~]+$|-{5,}$|For simplicity, JAX has"
    r"|The above exception|During handling of the above)"
)


_RACE_KIND = re.compile(r"^(Read/write|Write/write) race\b")


def title(code: str, message: str = "") -> str:
    """The one-line title of a code ("" when unknown); a race's says its kind, from its
    message ("A read/write race")."""
    if code.startswith("RACE") and (m := _RACE_KIND.match(message)):
        return f"A {m.group(1).lower()} race: unordered accesses to the same elements"
    entry = BY_CODE.get(code)
    if entry is not None:
        return entry.title
    own = OWN.get(code)
    return own[0] if own else ""


def exceptions_in(text: str) -> list[tuple[str, str]]:
    """Every ``(type, message)`` an exception text holds: a ``JaxRuntimeError``'s inner
    errors, the chained errors of a pasted traceback, each once, outermost first.

    A message runs from its ``Type: `` line to the next traceback line or blank line.
    """
    out: list[tuple[str, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _EXC_LINE.match(line)
        if not m:
            continue
        msg = [m.group(2) or ""]
        for nxt in lines[i + 1 :]:
            if not nxt.strip() or _TRACE_LINE.match(nxt) or _EXC_LINE.match(nxt):
                break
            msg.append(nxt)
        item = (m.group(1), "\n".join(msg).strip())
        if item not in out:
            out.append(item)
    return out


def unwrap(type_name: str, message: str) -> tuple[str, str]:
    """The innermost real error of a ``JaxRuntimeError`` (``INTERNAL: ... ValueError: msg``);
    other exceptions come back as they are."""
    if not (_WRAPPER.match(type_name) or type_name.endswith("JaxRuntimeError")):
        return type_name, message
    inner = [e for e in exceptions_in(message) if not e[0].endswith("JaxRuntimeError")]
    # the last one is the error that failed the callback (RuntimeError("Computation
    # failed ...") wraps it in some versions, so prefer a non-generic one)
    for t, m in reversed(inner):
        if not m.startswith("Computation failed on"):
            return t, m
    return inner[-1] if inner else (type_name, message)


def _short(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def classify(type_name: str, message: str) -> str | None:
    """The code of a raw JAX exception (type name and message), or None if unknown.

    Robust to a ``JaxRuntimeError`` around the real error, to a whole traceback as the
    message, and to ``module.Type`` names. Specific messages are searched anywhere in
    the text; generic ones (``tuple index out of range``, an empty message) must be
    the whole message of an exception of the catalogued type.
    """
    type_name = _short(type_name.strip())
    message = message or ""
    candidates = [(type_name, message.strip()), unwrap(type_name, message)]
    candidates += exceptions_in(message)
    for e in (*ENTRIES, *OWN_PATTERNS):
        if e.pattern.startswith("^"):
            rx = re.compile(e.pattern)
            for t, m in candidates:
                if _short(t) in (e.type, "") and rx.match(m.strip()) and (t or m):
                    return e.code
            if e.loose and any(
                re.search(e.loose, m) for m in (message, *(m for _, m in candidates))
            ):
                return e.code
            continue
        if any(re.search(e.pattern, m) for m in (message, *(m for _, m in candidates))):
            return e.code
    return None


_PREFIX = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception)):?(?:[ \t]|$)")


def classify_text(text: str) -> str | None:
    """The code in pasted text: ``ValueError: msg``, a whole traceback, a
    ``JaxRuntimeError`` dump, or just the message."""
    text = text.strip()
    m = _PREFIX.match(text)
    if m:
        return classify(m.group(1), text[m.end() :])
    found = exceptions_in(text)
    if found:
        t, _ = found[-1]
        return classify(t, text)
    return classify("", text)
