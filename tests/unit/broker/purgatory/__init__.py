"""Unit tests of services.broker.purgatory: timing wheel, timer, delayed operations, purgatory."""
