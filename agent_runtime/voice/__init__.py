"""Offline voice: hear commands (silero VAD + pocketsphinx grammar), speak commentary (espeak-ng), barge in.

Audio path, as frames through small processors (after Pipecat, kept small):

    mic callback --AudioBlock--> ListeningPipeline (VAD -> recognizer) --VadEvent/Hypothesis-->
        BargeInController (pause / confirm / interrupt) and the engine (commands)
    engine text --> TtsWorker (espeak-ng, ~60 ms chunks) --SpeechChunk--> PlaybackBuffer --> speaker callback

Every chunk and block is checked against the SessionGeneration when it is consumed, so a bump
(which every interruption does first) silences the next audio block and discards stale work.
Submodules import their heavy dependencies (onnxruntime, pocketsphinx, libespeak-ng) lazily.
"""
