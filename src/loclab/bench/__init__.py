"""The harness: stage inputs, validate against golden, time, compute rates against the roofs."""
