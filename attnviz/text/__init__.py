"""The text floor: pieces and words of a tokenized input, tokenizing, the vocabulary's fit,
naming a word of the text, the sample sentences. No torch; imports only the ground floor."""
