/* What the engine's log events say (engine.h, engine_log_text): the
 * words, apart from the decisions in engine.c. */
#include "peer/core/engine.h"

static const char *const log_texts[ENGINE_LOG_KINDS] = {
    [ENGINE_LOG_NEIGHBOUR_BACK] = "neighbour is back",
    [ENGINE_LOG_NEIGHBOUR_RECONNECTED] = "neighbour reconnected",
    [ENGINE_LOG_NEIGHBOUR_DONE] = "neighbour is done",
    [ENGINE_LOG_NEIGHBOUR_GOODBYE] = "neighbour said goodbye",
    [ENGINE_LOG_ROUTING_AROUND] = "routing around neighbour",
    [ENGINE_LOG_NOT_WAITING_FOR_LATE] = "not waiting for late neighbour",
    [ENGINE_LOG_ALL_IN_LOST] = "every in-neighbour lost: waiting for one to come back",
    [ENGINE_LOG_ISOLATED] = "no in-neighbour heard: keeping shares home",
    [ENGINE_LOG_HEARING_AGAIN] = "hearing in-neighbours again",
    [ENGINE_LOG_CATCHING_UP] = "catching up",
    [ENGINE_LOG_REFUSED] = "refused a share of peer",
    [ENGINE_LOG_NO_CHECKPOINT] = "no checkpoint: will pull the model from a neighbour",
    [ENGINE_LOG_FAR_BEHIND] = "far behind: asking for a neighbour's model",
    [ENGINE_LOG_MODEL_ASKED] = "asked for the current model: peer",
    [ENGINE_LOG_MODEL_SENT] = "sent its model to joining peer",
    [ENGINE_LOG_PROMISE_BROKEN] = "not waiting any longer for the model promised by peer",
    [ENGINE_LOG_MODEL_NOT_FINITE] = "model is not finite: asking another neighbour than",
    [ENGINE_LOG_MODEL_BAD_HASH] = "model failed its hash check: asking another neighbour than",
    [ENGINE_LOG_MODEL_TAKEN] = "took the current model of peer",
    [ENGINE_LOG_JOINED] = "joined with the model of peer",
    [ENGINE_LOG_NO_MODEL] = "no neighbour sent its model: going on with its own",
    [ENGINE_LOG_DIVERGED] = "the model is no longer finite: stopping",
    [ENGINE_LOG_TOO_LARGE] = "a message larger than the largest frame: stopping; it was for peer",
    [ENGINE_LOG_LEAVING] = "leaving without the last shares of its in-neighbours",
    [ENGINE_LOG_APART] = "its model differs from the run's: asking for the model of peer",
    [ENGINE_LOG_HANDED_OFF] = "leaving: handed its weight to its neighbours",
    [ENGINE_LOG_LEFT_WITH_WEIGHT] = "leaving with its weight",
};

const char *engine_log_text(engine_log log)
{
    return log >= 0 && log < ENGINE_LOG_KINDS && log_texts[log] ? log_texts[log] : "?";
}
