"""Send-to-next pipeline: rank r's buffer goes to rank r+1, cut into pipelined pieces.

The point-to-point pattern of pipeline-parallel training (stage r hands its
activations to stage r+1): rank n-1 sends nothing (or, with ``cyclic``, to
rank 0). The data is cut into ``chunks`` pieces spread over ``channels``
channels so several threadblocks drive the link. One communication step;
any rank count.
"""

from msccl_py.library.prelude import *


def _channels_ok(num_ranks, values):
    if values["channels"] > values["chunks"]:
        return f"channels ({values['channels']}) cannot exceed chunks ({values['chunks']})"
    return None


@library_program(
    "alltonext", "rank r -> r+1 in pipelined pieces over several channels", min_ranks=1,
    params=(Param("chunks", int, 4, "pipelined pieces", low=1, high=64),
            Param("channels", int, 2, "channels the pieces are spread over", low=1, high=16),
            Param("cyclic", bool, False, "the last rank sends to rank 0")),
    rank_check=_channels_ok, protocols=("Simple", "LL128", "LL"))
def send_to_next_pipeline(n, chunks=4, channels=2, cyclic=False):
    """Build the send-to-next pipeline (returns the finished MSCCLProgram).

    Parameters: ``chunks`` (default 4), ``channels`` (default 2), ``cyclic``
    (default false).

        python programs/send_to_next_pipeline.py 8 --chunks 8 --channels 4 --protocol Simple
    """
    require_ranks("send-to-next pipeline", n, minimum=1)
    if not 1 <= channels <= chunks:
        raise ProgramError(f"send_to_next_pipeline: channels must be in 1..chunks ({chunks}), "
                           f"got {channels}")
    with program(SendToNext(n, chunks, False, cyclic)):
        for r in range(n if cyclic else n - 1):
            for k in range(chunks):
                chunk(r, Buffer.input, k).copy((r + 1) % n, Buffer.output, k, ch=k % channels)


if __name__ == "__main__":
    sys.exit(send_to_next_pipeline.main())
