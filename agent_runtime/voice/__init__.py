"""Offline voice: hear commands (silero VAD + pocketsphinx grammar), speak commentary (espeak-ng), barge in.

Every chunk and block is checked against the SessionGeneration where it is consumed, so a bump silences the
next audio block. Submodules import onnxruntime, pocketsphinx and libespeak-ng lazily.
"""
