"""The load probe and its Locust worker: delivered rate and CPU per event against a bare reader."""
